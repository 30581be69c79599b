package strictjson

import (
	"reflect"
	"strings"
	"testing"

	"github.com/seckill/seckill/domain"
)

type payment struct {
	Ref    string `json:"payment_ref"`
	Amount int64  `json:"amount_cents,omitempty"`
	Note   string `json:"-"` // never a key
}

func TestDecodeRefusesWhatEncodingJSONWouldAccept(t *testing.T) {
	refused := map[string]string{
		"miscased key":   `{"PAYMENT_REF":"p"}`,
		"repeated key":   `{"payment_ref":"a","payment_ref":"b"}`,
		"unknown key":    `{"payment_ref":"p","x":1}`,
		"trailing value": `{"payment_ref":"p"} {}`,
		"not an object":  `["payment_ref"]`,
		"wrong type":     `{"amount_cents":"1"}`,
		"empty":          ``,
		"truncated":      `{"payment_ref":`,
	}
	for name, body := range refused {
		var p payment
		err := Decode([]byte(body), &p)
		if domain.ErrorCode(err) != domain.EInvalid {
			t.Errorf("%s: %q gave %v, want an %s error", name, body, err, domain.EInvalid)
		}
	}
	var p payment
	if err := Decode([]byte(` {"amount_cents":5, "payment_ref":"p1"} `), &p); err != nil || p != (payment{Ref: "p1", Amount: 5}) {
		t.Fatalf("a valid body: %v, %+v", err, p)
	}
}

func TestProblemNeverQuotesTheBody(t *testing.T) {
	var p payment
	err := Decode([]byte(`{"payment_ref":"p","secret-looking-key":1}`), &p)
	if err == nil || domain.ErrorMessage(err) == "" {
		t.Fatalf("unknown key accepted: %v", err)
	}
	if strings.Contains(domain.ErrorMessage(err), "secret-looking-key") {
		t.Errorf("message %q quotes the body", domain.ErrorMessage(err))
	}
}

func TestIsJSONContentType(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json": true, "Application/JSON; charset=utf-8": true, "application/json ;x=y": true,
		"application/jsonp": false, "text/plain": false, "": false,
	} {
		if got := IsJSONContentType([]byte(ct)); got != want {
			t.Errorf("%q: %v, want %v", ct, got, want)
		}
	}
}

func TestFieldsAreTheJSONTags(t *testing.T) {
	got := Fields(reflect.TypeFor[payment]())
	if len(got) != 2 || got[0] != "payment_ref" || got[1] != "amount_cents" {
		t.Fatalf("fields %v", got)
	}
}
