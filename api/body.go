package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"sync"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/domain"
)

// Request bodies are strict (contract 1.1): sent as application/json (any
// parameters), one JSON object whose keys are exactly the documented ones,
// case included, each at most once. encoding/json matches keys without
// regard to case and lets a repeated key win, so the keys are checked on
// the raw body first.

// jsonBody is the request's body, or 415 when a non-empty body is not
// declared application/json.
func jsonBody(c *fiber.Ctx) ([]byte, error) {
	// The raw body: Fiber's Body() would inflate a Content-Encoding past
	// the 8 KiB limit.
	body := c.BodyRaw()
	if len(body) > 0 && !isJSONContentType(c.Request().Header.ContentType()) {
		return nil, domain.Errorf(domain.EUnsupportedMediaType, "request body must be application/json")
	}
	return body, nil
}

// isJSONContentType accepts application/json with or without parameters.
func isJSONContentType(ct []byte) bool {
	const want = "application/json"
	if len(ct) < len(want) || !strings.EqualFold(string(ct[:len(want)]), want) {
		return false
	}
	rest := ct[len(want):]
	rest = bytes.TrimLeft(rest, " \t")
	return len(rest) == 0 || rest[0] == ';'
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
		i := indexOf(allowed, key)
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

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

var fieldCache sync.Map // reflect.Type -> []string

// jsonFields are the JSON keys of struct type t (its json tags).
func jsonFields(t reflect.Type) []string {
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

// decodeStrict decodes exactly one JSON object into v (a pointer to a
// struct), refusing unknown, miscased and repeated keys and trailing data.
// decodeBody reads the request's JSON body strictly into v.
func decodeBody(c *fiber.Ctx, v any) error {
	body, err := jsonBody(c)
	if err != nil {
		return err
	}
	return decodeStrict(body, v)
}

func decodeStrict(body []byte, v any) error {
	if err := checkKeys(body, jsonFields(reflect.TypeOf(v).Elem())); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return domain.Errorf(domain.EInvalid, "invalid JSON body: %s", jsonProblem(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return domain.Errorf(domain.EInvalid, "invalid JSON body: exactly one JSON value expected")
	}
	return nil
}
