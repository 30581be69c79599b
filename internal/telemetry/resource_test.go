package telemetry

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/seckill/seckill/internal/buildinfo"
)

// Every span's resource names the service and the build it runs; the
// standard variables still win.
func TestResourceNamesTheBuild(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging")
	res, err := Resource(context.Background(), "seckill-worker")
	if err != nil {
		t.Fatal(err)
	}
	want := map[attribute.Key]string{
		"service.name":           "seckill-worker",
		"service.version":        buildinfo.Read().ServiceVersion(),
		"deployment.environment": "staging",
	}
	for k, v := range want {
		if got, ok := res.Set().Value(k); !ok || got.AsString() != v {
			t.Errorf("%s = %q (set %v), want %q", k, got.AsString(), ok, v)
		}
	}
	if want["service.version"] == "" {
		t.Error("the build has no service version")
	}

	t.Setenv("OTEL_SERVICE_NAME", "shop-worker")
	res, err = Resource(context.Background(), "seckill-worker")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := res.Set().Value("service.name"); got.AsString() != "shop-worker" {
		t.Errorf("OTEL_SERVICE_NAME did not win: %q", got.AsString())
	}
}
