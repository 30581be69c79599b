package ops

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
)

// maxHandlerLines is the HTTP room's rule: a handler decodes, calls one
// service method and encodes, which takes at most 25 lines.
const maxHandlerLines = 25

// apiFiles parses the API package's Go files, its tests left out.
func apiFiles(t *testing.T) (*token.FileSet, []*ast.File) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "api", "*.go"))
	require.NoError(t, err)
	fset := token.NewFileSet()
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		require.NoError(t, err)
		files = append(files, f)
	}
	require.NotEmpty(t, files, "the API's Go files")
	return fset, files
}

// isHandler reports whether a function has a Fiber handler's signature:
// one *fiber.Ctx in, an error out.
func isHandler(ft *ast.FuncType) bool {
	if ft.Params == nil || len(ft.Params.List) != 1 || len(ft.Params.List[0].Names) > 1 ||
		ft.Results == nil || len(ft.Results.List) != 1 {
		return false
	}
	star, ok := ft.Params.List[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Ctx" {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	res, isIdent := ft.Results.List[0].Type.(*ast.Ident)
	return ok && pkg.Name == "fiber" && isIdent && res.Name == "error"
}

// TestHandlerFunctionsAtMostTwentyFiveLines walks every function of api/
// with a handler's signature, declared or literal (the middleware
// included), and fails on any over maxHandlerLines.
func TestHandlerFunctionsAtMostTwentyFiveLines(t *testing.T) {
	fset, files := apiFiles(t)
	var long []string
	handlers := 0
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			var ft *ast.FuncType
			name := "func literal"
			switch fn := n.(type) {
			case *ast.FuncDecl:
				ft, name = fn.Type, fn.Name.Name
			case *ast.FuncLit:
				ft = fn.Type
			default:
				return true
			}
			if !isHandler(ft) {
				return true
			}
			handlers++
			start, end := fset.Position(n.Pos()), fset.Position(n.End())
			if lines := end.Line - start.Line + 1; lines > maxHandlerLines {
				long = append(long, filepath.Base(start.Filename)+":"+strconv.Itoa(start.Line)+" "+name+": "+strconv.Itoa(lines)+" lines")
			}
			return true
		})
	}
	require.Greater(t, handlers, 40, "the walk found the API's handlers")
	require.Empty(t, long, "handlers over %d lines: move the work into a service method or a decoding helper", maxHandlerLines)
}
