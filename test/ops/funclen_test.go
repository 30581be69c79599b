package ops

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
)

// maxFuncLines is the house rule: no function over 80 lines, tests
// included, counted from its func line to its closing brace.
const maxFuncLines = 80

// TestNoFunctionOverEightyLines walks every Go file of the repository.
func TestNoFunctionOverEightyLines(t *testing.T) {
	root := testenv.RepoRoot()
	fset := token.NewFileSet()
	var long []string
	files := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files++
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFuncLines {
				rel, relErr := filepath.Rel(root, path)
				if relErr != nil {
					rel = path
				}
				long = append(long, rel+": "+fn.Name.Name)
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, files, 100, "the walk found the repository's Go files")
	require.Empty(t, long, "functions over %d lines", maxFuncLines)
}
