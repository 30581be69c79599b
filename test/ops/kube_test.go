package ops

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/seckill/seckill/internal/testkit/testenv"
)

// kubeObject is the part of a rendered manifest the checks read.
type kubeObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Selector       yaml.Node `yaml:"selector"`
		MinAvailable   any       `yaml:"minAvailable"`
		ScaleTargetRef struct {
			Kind string `yaml:"kind"`
			Name string `yaml:"name"`
		} `yaml:"scaleTargetRef"`
		Template podTemplate `yaml:"template"`
		Ports    []struct {
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
		PodMetricsEndpoints []struct {
			Port string `yaml:"port"`
			Path string `yaml:"path"`
		} `yaml:"podMetricsEndpoints"`
	} `yaml:"spec"`
}

type podTemplate struct {
	Metadata struct {
		Labels      map[string]string `yaml:"labels"`
		Annotations map[string]string `yaml:"annotations"`
	} `yaml:"metadata"`
	Spec struct {
		SecurityContext struct {
			RunAsNonRoot bool `yaml:"runAsNonRoot"`
		} `yaml:"securityContext"`
		Containers []container `yaml:"containers"`
	} `yaml:"spec"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type container struct {
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name string `yaml:"name"`
	} `yaml:"ports"`
	EnvFrom []struct {
		ConfigMapRef *struct {
			Name string `yaml:"name"`
		} `yaml:"configMapRef"`
		SecretRef *struct {
			Name string `yaml:"name"`
		} `yaml:"secretRef"`
	} `yaml:"envFrom"`
	Env []struct {
		Name string `yaml:"name"`
	} `yaml:"env"`
	StartupProbe   *probe `yaml:"startupProbe"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext struct {
		ReadOnlyRootFilesystem bool `yaml:"readOnlyRootFilesystem"`
	} `yaml:"securityContext"`
}

// renderKube renders a kustomization with kubectl (installed on these
// machines; the test fails without it).
func renderKube(t *testing.T, dir string) map[string]kubeObject {
	t.Helper()
	bin, err := exec.LookPath("kubectl")
	require.NoError(t, err, "kubectl (with kustomize) is needed to render deploy/k8s")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "kustomize", dir).Output()
	require.NoError(t, err, "kubectl kustomize %s", dir)
	objs := map[string]kubeObject{}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var o kubeObject
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		objs[o.Kind+"/"+o.Metadata.Name] = o
	}
	return objs
}

// The manifests in deploy/k8s render, and hold what running the fleet
// needs: probes on the right paths, resources, a non-root read-only
// container, the PDB and HPA on the API, Services that select pods,
// configuration and secrets of documented variables.
func TestKubernetesManifests(t *testing.T) {
	tree, written := kubeTree(t, true)
	objs := renderKube(t, filepath.Join(tree, "base"))
	var config, secrets kubeObject
	for _, o := range objs {
		switch o.Kind {
		case "ConfigMap":
			config = o
		case "Secret":
			secrets = o
		}
	}
	require.NotEmpty(t, config.Data, "a ConfigMap")
	require.NotEmpty(t, secrets.Data, "a Secret")
	documented := documentedVariables(t)
	for name := range config.Data {
		require.Contains(t, documented, name, "ConfigMap key %s is not a documented variable", name)
	}
	for name := range secrets.Data {
		require.Contains(t, documented, name, "Secret key %s is not a documented variable", name)
	}
	// The Secret is secrets.env's, not the committed template's.
	require.Len(t, secrets.Data, len(written))
	for name, value := range written {
		got, err := base64.StdEncoding.DecodeString(secrets.Data[name])
		require.NoError(t, err)
		require.Equal(t, value, string(got), "Secret key %s comes from secrets.env", name)
	}

	api := objs["Deployment/seckill-api"]
	worker := objs["Deployment/seckill-worker"]
	checkPod(t, "api", api.Spec.Template, "/readyz", "http")
	checkPod(t, "worker", worker.Spec.Template, "/healthz", "metrics")
	require.Equal(t, []string{"api"}, api.Spec.Template.Spec.Containers[0].Args)
	require.Equal(t, []string{"worker"}, worker.Spec.Template.Spec.Containers[0].Args)
	require.Equal(t, "8081", api.Spec.Template.Metadata.Annotations["prometheus.io/port"], "metrics are on the admin listener")
	require.Equal(t, ":8081", config.Data["ADMIN_ADDR"])

	pdb := objs["PodDisruptionBudget/seckill-api"]
	require.NotNil(t, pdb.Spec.MinAvailable)
	require.Equal(t, "seckill-api", matchLabel(t, pdb.Spec.Selector))
	hpa := objs["HorizontalPodAutoscaler/seckill-api"]
	require.Equal(t, "Deployment", hpa.Spec.ScaleTargetRef.Kind)
	require.Equal(t, "seckill-api", hpa.Spec.ScaleTargetRef.Name)
	for _, name := range []string{"seckill-api", "seckill-admin", "seckill-worker-metrics"} {
		svc, ok := objs["Service/"+name]
		require.True(t, ok, "Service %s", name)
		var sel map[string]string
		require.NoError(t, svc.Spec.Selector.Decode(&sel))
		target := api
		if name == "seckill-worker-metrics" {
			target = worker
		}
		require.Equal(t, target.Spec.Template.Metadata.Labels["app.kubernetes.io/name"], sel["app.kubernetes.io/name"], "Service %s selects its pods", name)
		for _, p := range svc.Spec.Ports {
			require.True(t, slices.ContainsFunc(target.Spec.Template.Spec.Containers[0].Ports, func(cp struct {
				Name string `yaml:"name"`
			}) bool {
				return cp.Name == p.TargetPort
			}), "Service %s targets port %s", name, p.TargetPort)
		}
	}
	job := objs["Job/seckill-migrate"]
	require.Equal(t, []string{"migrate"}, job.Spec.Template.Spec.Containers[0].Args)
}

// checkPod holds a pod template to the fleet's rules.
func checkPod(t *testing.T, name string, pod podTemplate, readyPath, port string) {
	t.Helper()
	require.True(t, pod.Spec.SecurityContext.RunAsNonRoot, "%s runs as non-root", name)
	require.Len(t, pod.Spec.Containers, 1)
	c := pod.Spec.Containers[0]
	require.Equal(t, "localhost/seckill:latest", c.Image)
	for what, p := range map[string]*probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		require.NotNil(t, p, "%s has a %s probe", name, what)
		require.Equal(t, port, p.HTTPGet.Port, "%s %s probe port", name, what)
	}
	require.Equal(t, readyPath, c.ReadinessProbe.HTTPGet.Path)
	require.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path, "%s: liveness never depends on a backend", name)
	require.NotEmpty(t, c.Resources.Requests["cpu"], "%s requests CPU", name)
	require.NotEmpty(t, c.Resources.Limits["memory"], "%s limits memory", name)
	require.True(t, c.SecurityContext.ReadOnlyRootFilesystem, "%s has a read-only root", name)
	require.Len(t, c.EnvFrom, 2, "%s reads the ConfigMap and the Secret", name)
	require.True(t, slices.ContainsFunc(c.Env, func(e struct {
		Name string `yaml:"name"`
	}) bool {
		return e.Name == "SECKILL_INSTANCE"
	}), "%s names its instance after the pod", name)
}

func matchLabel(t *testing.T, sel yaml.Node) string {
	t.Helper()
	var s struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	require.NoError(t, sel.Decode(&s))
	return s.MatchLabels["app.kubernetes.io/name"]
}

// documentedVariables is every variable docs/configuration.md lists (a
// config test holds that table to what config.go reads).
func documentedVariables(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "configuration.md"))
	require.NoError(t, err)
	var names []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Z][A-Z0-9_]+)`").FindAllStringSubmatch(string(doc), -1) {
		names = append(names, m[1])
	}
	require.Greater(t, len(names), 30)
	return names
}

// kubeTree copies deploy/k8s to a temp dir, without the files a developer
// or scripts/test-kube.sh may have written into it (they are git-ignored),
// and with secrets, writes base/secrets.env: the template's variables with
// random values, which it returns.
func kubeTree(t *testing.T, withSecrets bool) (string, map[string]string) {
	t.Helper()
	src := filepath.Join(testenv.RepoRoot(), "deploy", "k8s")
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(src)))
	for _, f := range []string{"base/secrets.env", "test/secrets.env", "test/test.env"} {
		require.NoError(t, os.RemoveAll(filepath.Join(dir, f)))
	}
	if !withSecrets {
		return dir, nil
	}
	raw, err := os.ReadFile(filepath.Join(src, "base", "secrets.env.example"))
	require.NoError(t, err)
	written := map[string]string{}
	var env strings.Builder
	for _, line := range strings.Split(string(raw), "\n") {
		name, _, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		written[name] = rand.Text()
		fmt.Fprintf(&env, "%s=%s\n", name, written[name])
	}
	require.GreaterOrEqual(t, len(written), 5, "the template's variables")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "base", "secrets.env"), []byte(env.String()), 0o600))
	return dir, written
}

// The base reads the git-ignored secrets.env, never the committed
// template: without it kubectl kustomize fails, naming the file, and the
// kustomization says how to write it.
func TestKubernetesBaseNeedsSecretsEnv(t *testing.T) {
	bin, err := exec.LookPath("kubectl")
	require.NoError(t, err, "kubectl (with kustomize) is needed to render deploy/k8s")
	tree, _ := kubeTree(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "kustomize", filepath.Join(tree, "base")).CombinedOutput()
	require.Error(t, err, "the base rendered without secrets.env:\n%s", out)
	require.Contains(t, string(out), "secrets.env: no such file or directory")
	kust, err := os.ReadFile(filepath.Join(tree, "base", "kustomization.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(kust), "cp secrets.env.example secrets.env")
	require.NotContains(t, string(kust), "envs: [secrets.env.example]")
}

// deploy/k8s/overlays/monitoring renders the base and a PodMonitor for each
// of the API and the worker, selecting their pods on the ports their
// containers serve /metrics on.
func TestKubernetesMonitoringOverlay(t *testing.T) {
	tree, _ := kubeTree(t, true)
	objs := renderKube(t, filepath.Join(tree, "overlays", "monitoring"))
	for _, name := range []string{"seckill-api", "seckill-worker"} {
		deploy, ok := objs["Deployment/"+name]
		require.True(t, ok, "the overlay renders the base's Deployment %s", name)
		pm, ok := objs["PodMonitor/"+name]
		require.True(t, ok, "PodMonitor %s", name)
		require.Equal(t, deploy.Spec.Template.Metadata.Labels["app.kubernetes.io/name"], matchLabel(t, pm.Spec.Selector), "PodMonitor %s selects its pods", name)
		require.Len(t, pm.Spec.PodMetricsEndpoints, 1)
		ep := pm.Spec.PodMetricsEndpoints[0]
		require.Equal(t, "/metrics", ep.Path)
		require.True(t, slices.ContainsFunc(deploy.Spec.Template.Spec.Containers[0].Ports, func(cp struct {
			Name string `yaml:"name"`
		}) bool {
			return cp.Name == ep.Port
		}), "PodMonitor %s scrapes port %s of its pods", name, ep.Port)
	}
	require.Equal(t, "admin", objs["PodMonitor/seckill-api"].Spec.PodMetricsEndpoints[0].Port, "the API's metrics are on its admin listener")
}
