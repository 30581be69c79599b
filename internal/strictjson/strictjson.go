// Package strictjson decodes request bodies strictly (contract 1.1): one
// JSON object whose keys are exactly the documented ones, case included,
// each at most once, and nothing after it. encoding/json matches keys
// without regard to case and lets a repeated key win, so the keys are
// checked on the raw body first. Refusals are domain.EInvalid errors whose
// messages never quote the body.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/seckill/seckill/domain"
)

// Decode decodes exactly one JSON object into v (a pointer to a struct),
// refusing unknown, miscased and repeated keys and trailing data.
func Decode(body []byte, v any) error {
	if err := checkKeys(body, Fields(reflect.TypeOf(v).Elem())); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return domain.Errorf(domain.EInvalid, "invalid JSON body: %s", Problem(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return domain.Errorf(domain.EInvalid, "invalid JSON body: exactly one JSON value expected")
	}
	return nil
}

// IsJSONContentType accepts application/json with or without parameters.
func IsJSONContentType(ct []byte) bool {
	const want = "application/json"
	if len(ct) < len(want) || !strings.EqualFold(string(ct[:len(want)]), want) {
		return false
	}
	rest := bytes.TrimLeft(ct[len(want):], " \t")
	return len(rest) == 0 || rest[0] == ';'
}

// Problem names what was wrong with a body the decoder refused, without
// echoing the body.
func Problem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %s has the wrong type", te.Field)
		}
		return "the body must be a JSON object"
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("syntax error at offset %d", se.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "empty or truncated body"
	}
	if strings.HasPrefix(err.Error(), "json: unknown field ") {
		return "unknown field" // not named: answers never quote the request
	}
	return "malformed body"
}

var errNotObject = domain.Errorf(domain.EInvalid, "invalid JSON body: the body must be a JSON object")

// checkKeys walks the top level of body: an object whose keys are all in
// allowed (exactly) and appear once. Syntax errors are left to the decoder.
func checkKeys(body []byte, allowed []string) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return nil // empty or malformed: the decoder names it
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errNotObject
	}
	seen := make([]bool, len(allowed))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := tok.(string)
		i := slices.Index(allowed, key)
		if i < 0 {
			return domain.Errorf(domain.EInvalid, "invalid JSON body: unknown field; the fields are %s (case-sensitive)", strings.Join(allowed, ", "))
		}
		if seen[i] {
			return domain.Errorf(domain.EInvalid, "invalid JSON body: field %s appears more than once", allowed[i])
		}
		seen[i] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}

var fieldCache sync.Map // reflect.Type -> []string

// Fields are the JSON keys of struct type t (its json tags).
func Fields(t reflect.Type) []string {
	if v, ok := fieldCache.Load(t); ok {
		return v.([]string)
	}
	var out []string
	if t.Kind() == reflect.Struct {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			out = append(out, name)
		}
	}
	fieldCache.Store(t, out)
	return out
}
