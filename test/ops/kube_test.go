package ops

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/seckill/seckill/internal/testenv"
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
	objs := renderKube(t, filepath.Join(testenv.RepoRoot(), "deploy", "k8s", "base"))
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
