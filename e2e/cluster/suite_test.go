package cluster

// The `cluster` suite's bed (docs/e2e.md): a real etcd + kube-apiserver, the chart installed by
// the real helm, two scheduler "pods" (the real kube-scheduler with the chart's
// KubeSchedulerConfiguration + gpupack-extender, each with the chart's ServiceAccount token),
// gpupack-webhook registered through the chart's MutatingWebhookConfiguration, and one
// gpupack-agent per Node (file backend) with the agent ServiceAccount's token. No kubelet: the
// test creates the Node objects and bound pods stay Pending with spec.nodeName set.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"
)

const (
	releaseNS     = "gpupack"
	release       = "gpupack"
	reservedTaint = "gpupack-e2e/reserved"
	// Long enough that a loaded 2-core machine (agents and API server starved for seconds) does
	// not make healthy nodes stale mid-scenario; short enough for the stale-agent scenario.
	heartbeatTTL    = "15s"
	heartbeatTTLd   = 15 * time.Second
	podImage        = "registry.invalid/gpupack-e2e:none" // never pulled: there is no kubelet
	resourceMemory  = "gpupack.io/gpu-memory"
	resourceGpu     = "gpupack.io/gpu"
	resourceCompute = "gpupack.io/gpu-compute"
)

var gpuNodesGVR = schema.GroupVersionResource{Group: "gpupack.io", Version: "v1alpha1", Resource: "gpunodes"}

// schedulerPod is one replica of the chart's scheduler Deployment: kube-scheduler + extender.
type schedulerPod struct {
	kubeScheduler *proc
	extender      *proc
	kubeSchedArgs []string
	extenderArgs  []string
	extenderPort  int
	metricsPort   int
}

type bed struct {
	dir       string
	logDir    string
	bin       string
	binaries  map[string]string // extender, agent, webhook
	chart     string
	cp        *controlPlane
	kc        kubernetes.Interface
	dyn       dynamic.Interface
	rest      *rest.Config
	helmEnv   []string
	scheduler []*schedulerPod
	webhook   *proc
	agents    map[string]*proc
	agentArgs map[string][]string
	nodes     []string
	// The agents' cluster file: testdata/cluster.yaml, or a copy with GPUPACK_BENCH_NODES more nodes.
	clusterFile string
	schedName   string

	saScheduler, saAgent                 string
	schedulerKubeconfig, agentKubeconfig string

	// Where the API server is. Started here (cp) unless GPUPACK_CLUSTER_KUBECONFIG names an existing
	// cluster (external): then nothing is started but gpupack's processes and kube-scheduler.
	external    bool
	admin       string   // kubeconfig with cluster-admin rights
	server      string   // https://HOST:PORT
	serverCA    []byte   // PEM the components verify the API server with
	certCA      *keyPair // signs the webhook's serving certificate
	webhookHost string   // IP the API server reaches this machine's webhook at
	nsSuffix    string   // appended to scenario namespaces (external: a run id)
	namespaces  []string // created by the scenarios
	// Between the scheduler pods and the bed's own API server (nil on an existing cluster, whose
	// serving certificate need not name 127.0.0.1): the slow-API scenario delays through it.
	apiProxy *faultProxy

	stopNodeHeartbeats chan struct{}
}

var tb *bed

func TestMain(m *testing.M) {
	b, err := setUp()
	tb = b
	code := 1
	if err != nil {
		fmt.Fprintf(os.Stderr, "cluster suite: setting up the real control plane failed: %v\n", err)
		b.dumpLogs()
	} else {
		code = m.Run()
		if code != 0 {
			b.dumpLogs()
		}
	}
	b.tearDown(code == 0)
	os.Exit(code)
}

func env(name string) (string, error) {
	v := os.Getenv(name)
	if v == "" {
		return "", fmt.Errorf("$%s is not set (scripts/test.sh and CTest set it; see docs/e2e.md)", name)
	}
	if _, err := os.Stat(v); err != nil {
		return "", fmt.Errorf("$%s=%s: %v", name, v, err)
	}
	return v, nil
}

func setUp() (*bed, error) {
	b := &bed{binaries: map[string]string{}, agents: map[string]*proc{}, agentArgs: map[string][]string{}}
	var err error
	if b.bin, err = env("GPUPACK_CONTROLPLANE_BIN"); err != nil {
		return b, err
	}
	for _, c := range []string{"extender", "agent", "webhook"} {
		if b.binaries[c], err = env("GPUPACK_" + strings.ToUpper(c)); err != nil {
			return b, err
		}
	}
	if b.chart, err = env("GPUPACK_CHART"); err != nil {
		return b, err
	}
	if b.dir, err = os.MkdirTemp("", "gpupack-cluster-"); err != nil {
		return b, err
	}
	b.logDir = filepath.Join(b.dir, "logs")
	if err := os.MkdirAll(b.logDir, 0o755); err != nil {
		return b, err
	}
	start := time.Now()
	if path := os.Getenv("GPUPACK_CLUSTER_KUBECONFIG"); path != "" {
		if err := b.useExistingCluster(path); err != nil {
			return b, err
		}
	} else {
		if b.cp, err = startControlPlane(b.bin, b.dir); err != nil {
			return b, err
		}
		b.admin, b.server, b.serverCA, b.certCA = b.cp.admin, b.cp.server, b.cp.ca.certPEM, b.cp.ca
		b.webhookHost = "127.0.0.1"
		if b.apiProxy, err = startFaultProxy(strings.TrimPrefix(b.server, "https://")); err != nil {
			return b, err
		}
	}
	if b.rest, err = clientcmd.BuildConfigFromFlags("", b.admin); err != nil {
		return b, err
	}
	b.rest.QPS, b.rest.Burst = 200, 400
	if b.kc, err = kubernetes.NewForConfig(b.rest); err != nil {
		return b, err
	}
	if b.dyn, err = dynamic.NewForConfig(b.rest); err != nil {
		return b, err
	}
	fmt.Printf("control plane ready in %.1fs at %s (logs and configs: %s)\n", time.Since(start).Seconds(), b.server, b.dir)
	if err := b.installChart(); err != nil {
		return b, err
	}
	if err := b.startWebhook(); err != nil {
		return b, err
	}
	if err := b.startAgents(); err != nil {
		return b, err
	}
	if err := b.startSchedulers(); err != nil {
		return b, err
	}
	fmt.Printf("bed ready in %.1fs: %d nodes, 2 scheduler replicas, webhook\n", time.Since(start).Seconds(), len(b.nodes))
	return b, nil
}

// useExistingCluster points the bed at the cluster of a kubeconfig with cluster-admin rights
// (kind, a real one): no etcd, kube-apiserver nor Node objects of its own are touched; the suite
// creates its Nodes, namespaces (with a run suffix) and the release, and removes them at the end.
func (b *bed) useExistingCluster(path string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return fmt.Errorf("GPUPACK_CLUSTER_KUBECONFIG=%s: %v", path, err)
	}
	ca := cfg.TLSClientConfig.CAData
	if len(ca) == 0 && cfg.TLSClientConfig.CAFile != "" {
		if ca, err = os.ReadFile(cfg.TLSClientConfig.CAFile); err != nil {
			return fmt.Errorf("GPUPACK_CLUSTER_KUBECONFIG=%s: %v", path, err)
		}
	}
	if len(ca) == 0 || !strings.HasPrefix(cfg.Host, "https://") {
		return fmt.Errorf("GPUPACK_CLUSTER_KUBECONFIG=%s: want an https server with certificate-authority(-data), got %q: the components' token kubeconfigs must verify it", path, cfg.Host)
	}
	b.webhookHost = os.Getenv("GPUPACK_CLUSTER_WEBHOOK_HOST")
	if b.webhookHost == "" {
		b.webhookHost = "127.0.0.1"
	}
	if net.ParseIP(b.webhookHost) == nil {
		return fmt.Errorf("GPUPACK_CLUSTER_WEBHOOK_HOST=%q is not an IP address (the one the API server reaches this machine at)", b.webhookHost)
	}
	if b.certCA, err = newCA("gpupack-e2e-webhook-ca"); err != nil {
		return err
	}
	var id [3]byte
	if _, err := rand.Read(id[:]); err != nil {
		return err
	}
	b.external, b.admin, b.server, b.serverCA, b.nsSuffix = true, path, cfg.Host, ca, fmt.Sprintf("-%x", id)
	return nil
}

func (b *bed) procs() []*proc {
	var out []*proc
	for _, s := range b.scheduler {
		out = append(out, s.kubeScheduler, s.extender)
	}
	out = append(out, b.webhook)
	for _, n := range b.nodes {
		out = append(out, b.agents[n])
	}
	return out
}

func (b *bed) tearDown(passed bool) {
	if b == nil {
		return
	}
	if b.stopNodeHeartbeats != nil {
		close(b.stopNodeHeartbeats)
	}
	for _, p := range b.procs() {
		p.stop(5 * time.Second)
	}
	b.apiProxy.close()
	b.cp.stop()
	if b.external && os.Getenv("GPUPACK_CLUSTER_KEEP") == "" {
		b.cleanUpCluster()
	}
	if b.dir != "" && passed && os.Getenv("GPUPACK_CLUSTER_KEEP") == "" {
		os.RemoveAll(b.dir)
	} else if b.dir != "" {
		fmt.Printf("kept %s (logs/, kubeconfigs, configs)\n", b.dir)
	}
}

func (b *bed) dumpLogs() {
	if b == nil {
		return
	}
	all := b.procs()
	if b.cp != nil {
		all = append(all, b.cp.etcd, b.cp.apiserver)
	}
	for _, p := range all {
		if p != nil {
			fmt.Printf("----- last lines of %s (%s)\n%s\n", p.name, p.logPath, p.tail(25))
		}
	}
}

func b64(data []byte) string { return base64.StdEncoding.EncodeToString(data) }

func tlsClient(_ []byte, kubeconfigPath string) (*http.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 5 * time.Second
	return rest.HTTPClientFor(cfg)
}

func ctx(timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), timeout)
}

// ---- chart -------------------------------------------------------------------------------------

func (b *bed) helm(args ...string) (string, error) {
	full := append([]string{filepath.Join(b.bin, "helm")}, args...)
	full = append(full, "--kubeconfig", b.admin)
	return runTool(2*time.Minute, b.helmEnv, full...)
}

func (b *bed) installChart() error {
	helmHome := filepath.Join(b.dir, "helm")
	b.helmEnv = []string{"HELM_CACHE_HOME=" + helmHome + "/cache", "HELM_CONFIG_HOME=" + helmHome + "/config",
		"HELM_DATA_HOME=" + helmHome + "/data"}
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	if b.clusterFile, err = b.writeClusterFile(); err != nil {
		return err
	}
	// Values a user would set for this bed: two scheduler replicas, short leader-election and
	// heartbeat timings so failover scenarios take seconds, the file backend, fast agent reports.
	sets := []string{
		"scheduler.replicas=2",
		fmt.Sprintf("scheduler.extender.port=%d", ports[0]),
		fmt.Sprintf("scheduler.extender.metricsPort=%d", ports[1]),
		"scheduler.leaderElection.leaseDuration=4s",
		"scheduler.leaderElection.renewDeadline=3s",
		"scheduler.leaderElection.retryPeriod=1s",
		"scheduler.extender.config.heartbeatTTL=" + heartbeatTTL,
		// Defragmentation evicts (TestDefrag*); only those scenarios' pods opt in to moving.
		"scheduler.extender.defragmentation=on",
		"agent.backend=file:" + b.clusterFile,
		"agent.extraArgs={--poll-interval,1s,--heartbeat-interval,1s,--min-write-interval,1s}",
	}
	args := []string{"install", release, b.chart, "--namespace", releaseNS, "--create-namespace", "--timeout", "60s"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	if b.external {
		// gpupack runs as local processes here; on a cluster with controllers the chart's own
		// pods would start too, and their kube-scheduler would compete for the Lease. A
		// nodeSelector no node matches keeps them Pending (the agent DaemonSet creates none).
		for _, c := range []string{"scheduler", "webhook", "agent"} {
			args = append(args, "--set-string", c+".nodeSelector.gpupack-e2e/local-processes=true")
		}
	}
	out, err := b.helm(args...)
	if err != nil {
		return fmt.Errorf("helm install: %v", err)
	}
	c, cancel := ctx(60 * time.Second)
	defer cancel()
	if err := b.checkNotes(c, out); err != nil {
		return err
	}
	// The CRD must be Established before agents write GPUNodes.
	if err := waitFor(30*time.Second, 200*time.Millisecond, "GPUNode CRD established", func() (bool, error) {
		_, err := b.dyn.Resource(gpuNodesGVR).List(c, metav1.ListOptions{Limit: 1})
		return err == nil, err
	}); err != nil {
		return err
	}
	// An upgrade finds the webhook's TLS Secret (helm `lookup` against the real API) and keeps
	// it: the CA under running webhook pods never rotates by accident.
	secretName, before, err := b.webhookSecret()
	if err != nil {
		return err
	}
	if _, err := b.helm("upgrade", release, b.chart, "--namespace", releaseNS, "--reuse-values", "--timeout", "60s"); err != nil {
		return fmt.Errorf("helm upgrade: %v", err)
	}
	_, after, err := b.webhookSecret()
	if err != nil {
		return err
	}
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if string(before[k]) != string(after[k]) {
			return fmt.Errorf("helm upgrade regenerated %s in Secret %s: lookup did not find the installed one", k, secretName)
		}
	}
	if err := verifyChartCert(before, b.webhookServiceDNS()); err != nil {
		return err
	}
	return b.readChartObjects()
}

// checkNotes: the NOTES.txt helm printed after the install (only a real install renders it)
// names objects that exist and tells how to find the active scheduler.
func (b *bed) checkNotes(c context.Context, out string) error {
	_, notes, found := strings.Cut(out, "\nNOTES:\n")
	if !found {
		return fmt.Errorf("helm install printed no NOTES:\n%s", out)
	}
	refs := regexp.MustCompile(`\b(svc|deploy)/([a-z0-9-]+)`).FindAllStringSubmatch(notes, -1)
	if len(refs) == 0 {
		return fmt.Errorf("NOTES.txt names no svc/ or deploy/ object:\n%s", notes)
	}
	for _, r := range refs {
		var err error
		if r[1] == "svc" {
			_, err = b.kc.CoreV1().Services(releaseNS).Get(c, r[2], metav1.GetOptions{})
		} else {
			_, err = b.kc.AppsV1().Deployments(releaseNS).Get(c, r[2], metav1.GetOptions{})
		}
		if err != nil {
			return fmt.Errorf("NOTES.txt names %s/%s, which the install did not create: %v", r[1], r[2], err)
		}
	}
	if !strings.Contains(notes, "get lease gpupack-scheduler") {
		return fmt.Errorf("NOTES.txt has no `get lease gpupack-scheduler` command:\n%s", notes)
	}
	return nil
}

func (b *bed) webhookServiceDNS() string {
	return fmt.Sprintf("%s-webhook.%s.svc", release, releaseNS)
}

func (b *bed) webhookSecret() (string, map[string][]byte, error) {
	c, cancel := ctx(10 * time.Second)
	defer cancel()
	list, err := b.kc.CoreV1().Secrets(releaseNS).List(c, metav1.ListOptions{})
	if err != nil {
		return "", nil, err
	}
	for _, s := range list.Items {
		if s.Type == corev1.SecretTypeTLS {
			return s.Name, s.Data, nil
		}
	}
	return "", nil, fmt.Errorf("the chart installed no kubernetes.io/tls Secret in %s", releaseNS)
}

// readChartObjects takes the components' command lines, configs and ServiceAccounts from what
// helm installed, so the processes below run as the chart says.
func (b *bed) readChartObjects() error {
	c, cancel := ctx(20 * time.Second)
	defer cancel()
	deps, err := b.kc.AppsV1().Deployments(releaseNS).List(c, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, d := range deps.Items {
		component := d.Labels["app.kubernetes.io/component"]
		if component == "scheduler" {
			b.saScheduler = d.Spec.Template.Spec.ServiceAccountName
			for _, ctr := range d.Spec.Template.Spec.Containers {
				switch ctr.Name {
				case "kube-scheduler":
					b.scheduler = append(b.scheduler, &schedulerPod{kubeSchedArgs: ctr.Command}, &schedulerPod{kubeSchedArgs: ctr.Command})
				}
			}
			for _, ctr := range d.Spec.Template.Spec.Containers {
				if ctr.Name == "extender" {
					for _, s := range b.scheduler {
						s.extenderArgs = ctr.Command
					}
				}
			}
			if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
				return fmt.Errorf("scheduler Deployment replicas = %v, want 2 (scheduler.replicas=2)", d.Spec.Replicas)
			}
		}
	}
	if len(b.scheduler) != 2 || b.scheduler[0].extenderArgs == nil {
		return fmt.Errorf("the chart's scheduler Deployment has no kube-scheduler + extender containers")
	}
	ds, err := b.kc.AppsV1().DaemonSets(releaseNS).List(c, metav1.ListOptions{})
	if err != nil || len(ds.Items) != 1 {
		return fmt.Errorf("want the agent DaemonSet: %v", err)
	}
	b.saAgent = ds.Items[0].Spec.Template.Spec.ServiceAccountName
	b.agentArgs["template"] = ds.Items[0].Spec.Template.Spec.Containers[0].Command
	return nil
}

// tokenKubeconfig writes a kubeconfig holding a fresh token of ServiceAccount releaseNS/sa, so a
// component has exactly the chart's RBAC for it.
func (b *bed) tokenKubeconfig(sa string) (string, error) {
	return b.tokenKubeconfigFor(sa, b.server)
}

// tokenKubeconfigFor is tokenKubeconfig reaching the API server at `server`.
func (b *bed) tokenKubeconfigFor(sa, server string) (string, error) {
	c, cancel := ctx(10 * time.Second)
	defer cancel()
	expiry := int64(3600)
	tr, err := b.kc.CoreV1().ServiceAccounts(releaseNS).CreateToken(c, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for ServiceAccount %s/%s: %v", releaseNS, sa, err)
	}
	path := filepath.Join(b.dir, sa+".kubeconfig")
	return path, kubeconfig(path, server, b.serverCA, nil, tr.Status.Token)
}

func (b *bed) configMapData(name, key string) (string, error) {
	c, cancel := ctx(10 * time.Second)
	defer cancel()
	cm, err := b.kc.CoreV1().ConfigMaps(releaseNS).Get(c, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	v, ok := cm.Data[key]
	if !ok {
		return "", fmt.Errorf("ConfigMap %s has no %s", name, key)
	}
	return v, nil
}

// replaceArg returns args with every element for which `f` returns a non-empty string replaced.
func mapArgs(args []string, f func(string) string) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		if r := f(a); r != "" {
			out = append(out, r)
		} else {
			out = append(out, a)
		}
	}
	return out
}

// ---- webhook -----------------------------------------------------------------------------------

func (b *bed) startWebhook() error {
	c, cancel := ctx(20 * time.Second)
	defer cancel()
	deps, err := b.kc.AppsV1().Deployments(releaseNS).List(c, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=webhook"})
	if err != nil || len(deps.Items) != 1 {
		return fmt.Errorf("want one webhook Deployment: %v", err)
	}
	d := deps.Items[0]
	var cmName string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil {
			cmName = v.ConfigMap.Name
		}
	}
	config, err := b.configMapData(cmName, "webhook.yaml")
	if err != nil {
		return err
	}
	configPath := filepath.Join(b.dir, "webhook.yaml")
	if err := writeFile(configPath, []byte(config)); err != nil {
		return err
	}
	// The API server reaches the webhook by URL (no Service routing without a cluster network):
	// on loopback, or at GPUPACK_CLUSTER_WEBHOOK_HOST, with a serving certificate from the test CA.
	serving, err := newServing(b.certCA, "gpupack-webhook", []string{"localhost"}, net.ParseIP(b.webhookHost))
	if err != nil {
		return err
	}
	certPath, keyPath := filepath.Join(b.dir, "webhook-tls", "tls.crt"), filepath.Join(b.dir, "webhook-tls", "tls.key")
	if err := writeFile(certPath, serving.certPEM); err != nil {
		return err
	}
	if err := writeFile(keyPath, serving.keyPEM); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	hostPort := net.JoinHostPort(b.webhookHost, fmt.Sprint(port))
	args := mapArgs(d.Spec.Template.Spec.Containers[0].Command, func(a string) string {
		switch {
		case a == "gpupack-webhook":
			return b.binaries["webhook"]
		case strings.HasPrefix(a, ":"):
			return hostPort
		case a == "/tls/tls.crt":
			return certPath
		case a == "/tls/tls.key":
			return keyPath
		case a == "/etc/gpupack/webhook.yaml":
			return configPath
		}
		return ""
	})
	if b.webhook, err = startProc(b.logDir, "gpupack-webhook", args, nil); err != nil {
		return err
	}
	name := d.Name // the MutatingWebhookConfiguration shares the component's name
	patch := fmt.Sprintf(`[{"op":"replace","path":"/webhooks/0/clientConfig","value":{"url":"https://%s/mutate","caBundle":%q}}]`,
		hostPort, b64(b.certCA.certPEM))
	if _, err := b.kc.AdmissionregistrationV1().MutatingWebhookConfigurations().Patch(c, name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("pointing MutatingWebhookConfiguration %s at the loopback webhook: %v", name, err)
	}
	return waitFor(20*time.Second, 200*time.Millisecond, "webhook listening", func() (bool, error) {
		if b.webhook.exited() {
			return false, fmt.Errorf("gpupack-webhook exited: %s", b.webhook.tail(10))
		}
		conn, err := (&http.Client{Timeout: time.Second}).Get("http://" + hostPort + "/")
		if conn != nil {
			conn.Body.Close()
		}
		// Any answer (even a TLS complaint) means it listens; refused means not yet.
		return err == nil || !strings.Contains(err.Error(), "refused"), nil
	})
}

// ---- nodes and agents --------------------------------------------------------------------------

type clusterFile struct {
	Nodes []struct {
		Name   string            `json:"name"`
		CPU    string            `json:"cpu"`
		Memory string            `json:"memory"`
		Labels map[string]string `json:"labels"`
	} `json:"nodes"`
}

// envCount is the whole number in environment variable `name`, at least `least`; `fallback` when
// the variable is unset or empty.
func envCount(name string, fallback, least int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return fallback, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		return 0, fmt.Errorf("%s=%q: want a whole number, at least %d", name, v, least)
	}
	return n, nil
}

// writeClusterFile returns the agents' cluster file: testdata/cluster.yaml, or with
// GPUPACK_BENCH_NODES a copy in the bed's directory with nodes bench-1 … bench-N appended.
func (b *bed) writeClusterFile() (string, error) {
	base, err := filepath.Abs("testdata/cluster.yaml")
	if err != nil {
		return "", err
	}
	// GPUPACK_BENCH_NODES: nodes of 2 × 80 GiB added for TestBindThroughput at a larger scale
	// (docs/e2e.md); the other scenarios are written for the file's nodes alone.
	extra, err := envCount("GPUPACK_BENCH_NODES", 0, 0)
	if err != nil || extra == 0 {
		return base, err
	}
	raw, err := os.ReadFile(base)
	if err != nil {
		return "", err
	}
	var more strings.Builder
	for i := 1; i <= extra; i++ {
		fmt.Fprintf(&more, "  - name: bench-%d\n    cpu: \"64\"\n    memory: 512Gi\n    gpus:\n"+
			"      - {model: NVIDIA A100-SXM4-80GB, memory: 80Gi, count: 2}\n", i)
	}
	path := filepath.Join(b.dir, "cluster.yaml")
	text := strings.TrimRight(string(raw), "\n") + "\n" + more.String()
	return path, os.WriteFile(path, []byte(text), 0o644)
}

func (b *bed) startAgents() error {
	raw, err := os.ReadFile(b.clusterFile)
	if err != nil {
		return err
	}
	var cf clusterFile
	if err := yaml.Unmarshal(raw, &cf); err != nil {
		return fmt.Errorf("%s: %v", b.clusterFile, err)
	}
	if b.agentKubeconfig, err = b.tokenKubeconfig(b.saAgent); err != nil {
		return err
	}
	c, cancel := ctx(30 * time.Second)
	defer cancel()
	for _, n := range cf.Nodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{
			"kubernetes.io/hostname": n.Name, "kubernetes.io/os": "linux", "nvidia.com/gpu.present": "true"}}}
		for k, v := range n.Labels {
			node.Labels[k] = v
		}
		if n.Labels["reserved"] != "" {
			node.Spec.Taints = []corev1.Taint{{Key: reservedTaint, Value: n.Labels["reserved"], Effect: corev1.TaintEffectNoSchedule}}
		}
		created, err := b.kc.CoreV1().Nodes().Create(c, node, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		// What a kubelet would report; gpupack's extended resources come from the agent.
		res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(n.CPU),
			corev1.ResourceMemory: resource.MustParse(n.Memory), corev1.ResourcePods: resource.MustParse("250")}
		created.Status.Capacity, created.Status.Allocatable = res, res
		created.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		if _, err := b.kc.CoreV1().Nodes().UpdateStatus(c, created, metav1.UpdateOptions{}); err != nil {
			return err
		}
		if err := b.untaintReadyNode(c, n.Name); err != nil {
			return fmt.Errorf("removing %s from node %s as the node lifecycle controller would: %v", notReadyTaint, n.Name, err)
		}
		b.nodes = append(b.nodes, n.Name)
		if err := b.renewNodeLease(c, n.Name); err != nil {
			return err
		}
		if err := b.startAgent(n.Name); err != nil {
			return err
		}
	}
	b.stopNodeHeartbeats = make(chan struct{})
	go b.heartbeatNodes(b.stopNodeHeartbeats)
	return waitFor(40*time.Second, 250*time.Millisecond, "a GPUNode with devices per node", func() (bool, error) {
		list, err := b.dyn.Resource(gpuNodesGVR).List(c, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		have := map[string]bool{}
		for _, g := range list.Items {
			devices, _, _ := unstructuredSlice(g.Object, "status", "devices")
			if len(devices) > 0 {
				have[g.GetName()] = true
			}
		}
		for _, n := range b.nodes {
			if b.agents[n].exited() {
				return false, fmt.Errorf("agent of %s exited: %s", n, b.agents[n].tail(10))
			}
			if !have[n] {
				return false, fmt.Errorf("no GPUNode status for %s yet", n)
			}
		}
		return true, nil
	})
}

// notReadyTaint is what the real kube-apiserver's TaintNodesByCondition admission puts on every
// Node it creates; kube-controller-manager's node lifecycle controller removes it once the kubelet
// reports Ready. Our stand-in API server adds nothing (and the stand-in scheduler ignores taints),
// so this is a real-component difference: without a controller manager the bed plays that
// controller, and it fails loudly if the API server stops adding the taint, because then the
// reserved-node taints below would be the only ones and the bed no longer mirrors a cluster.
const notReadyTaint = "node.kubernetes.io/not-ready"

func (b *bed) untaintReadyNode(c context.Context, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := b.kc.CoreV1().Nodes().Get(c, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var keep []corev1.Taint
		found := false
		for _, t := range node.Spec.Taints {
			if t.Key == notReadyTaint {
				found = true
				continue
			}
			keep = append(keep, t)
		}
		if !found && !b.external {
			return fmt.Errorf("node %s was created without the %s taint: kube-apiserver's TaintNodesByCondition admission is off, the bed no longer mirrors a cluster (taints %v)",
				node.Name, notReadyTaint, node.Spec.Taints)
		}
		if !found {
			return nil // an existing cluster's node lifecycle controller was faster
		}
		node.Spec.Taints = keep
		_, err = b.kc.CoreV1().Nodes().Update(c, node, metav1.UpdateOptions{})
		return err
	})
}

// renewNodeLease renews the node's Lease in kube-node-lease as its kubelet would. Without it, a
// cluster's node lifecycle controller (kind, a real one) marks a Node without a kubelet
// unreachable after its grace period, taints it, and evicts the scenario's pods.
func (b *bed) renewNodeLease(c context.Context, node string) error {
	leases := b.kc.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(c, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		holder, seconds := node, int32(40)
		_, err = leases.Create(c, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: node},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: &now}}, metav1.CreateOptions{})
	} else if err == nil {
		l.Spec.RenewTime = &now
		_, err = leases.Update(c, l, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("node Lease %s/%s: %v", corev1.NamespaceNodeLease, node, err)
	}
	return nil
}

func (b *bed) heartbeatNodes(stop <-chan struct{}) {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			c, cancel := ctx(8 * time.Second)
			for _, n := range b.nodes {
				if err := b.renewNodeLease(c, n); err != nil {
					fmt.Printf("node heartbeat: %v\n", err) // a missed renewal is retried in 10s
				}
			}
			cancel()
		}
	}
}

// cleanUpCluster removes what the suite created on an existing cluster: the scenarios' pods
// (grace 0: no kubelet confirms a graceful delete) and namespaces, the Nodes with their Leases
// and GPUNodes, the release and the CRD the chart keeps on uninstall.
func (b *bed) cleanUpCluster() {
	c, cancel := ctx(2 * time.Minute)
	defer cancel()
	zero := int64(0)
	now := metav1.DeleteOptions{GracePeriodSeconds: &zero}
	report := func(what string, err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			fmt.Printf("clean-up: %s: %v\n", what, err)
		}
	}
	for _, ns := range b.namespaces {
		report("pods of "+ns, b.kc.CoreV1().Pods(ns).DeleteCollection(c, now, metav1.ListOptions{}))
		report("namespace "+ns, b.kc.CoreV1().Namespaces().Delete(c, ns, metav1.DeleteOptions{}))
	}
	for _, n := range b.nodes {
		report("node "+n, b.kc.CoreV1().Nodes().Delete(c, n, now))
		report("node lease "+n, b.kc.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(c, n, metav1.DeleteOptions{}))
		report("GPUNode "+n, b.dyn.Resource(gpuNodesGVR).Delete(c, n, metav1.DeleteOptions{}))
	}
	if _, err := b.helm("uninstall", release, "--namespace", releaseNS, "--timeout", "60s"); err != nil {
		report("helm uninstall", err)
	}
	report("namespace "+releaseNS, b.kc.CoreV1().Namespaces().Delete(c, releaseNS, metav1.DeleteOptions{}))
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	report("CRD", b.dyn.Resource(crds).Delete(c, gpuNodesGVR.Resource+"."+gpuNodesGVR.Group, metav1.DeleteOptions{}))
}

func (b *bed) startAgent(node string) error {
	args := mapArgs(b.agentArgs["template"], func(a string) string {
		switch {
		case a == "gpupack-agent":
			return b.binaries["agent"]
		case a == "$(NODE_NAME)":
			return node
		case strings.HasPrefix(a, ":"):
			return "127.0.0.1:0"
		}
		return ""
	})
	args = append(args, "--kubeconfig", b.agentKubeconfig)
	p, err := startProc(b.logDir, "agent-"+node, args, nil)
	if err != nil {
		return err
	}
	b.agents[node] = p
	return nil
}

// ---- scheduler replicas ----------------------------------------------------------------------

func (b *bed) startSchedulers() error {
	var err error
	server := b.server
	if b.apiProxy != nil {
		server = "https://" + b.apiProxy.addr()
	}
	if b.schedulerKubeconfig, err = b.tokenKubeconfigFor(b.saScheduler, server); err != nil {
		return err
	}
	schedConfig, err := b.configMapData(b.saScheduler, "scheduler-config.yaml")
	if err != nil {
		return err
	}
	extConfig, err := b.configMapData(b.saScheduler, "extender.yaml")
	if err != nil {
		return err
	}
	var sc map[string]any
	if err := yaml.Unmarshal([]byte(schedConfig), &sc); err != nil {
		return fmt.Errorf("the chart's scheduler-config.yaml: %v", err)
	}
	b.schedName = sc["profiles"].([]any)[0].(map[string]any)["schedulerName"].(string)
	urlPrefix := sc["extenders"].([]any)[0].(map[string]any)["urlPrefix"].(string)
	var ext map[string]any
	if err := yaml.Unmarshal([]byte(extConfig), &ext); err != nil {
		return fmt.Errorf("the chart's extender.yaml: %v", err)
	}
	chartMetrics := ext["metricsListen"].(string)
	chartListen := ""
	for _, a := range b.scheduler[0].extenderArgs {
		if strings.HasPrefix(a, "127.0.0.1:") {
			chartListen = a
		}
	}
	if chartListen == "" || !strings.Contains(urlPrefix, chartListen) {
		return fmt.Errorf("extender --listen %q is not what kube-scheduler calls (%s)", chartListen, urlPrefix)
	}
	for i, s := range b.scheduler {
		// Replica 0 uses the chart's ports as they are; in a cluster each pod has its own
		// loopback, here the second replica needs its own ports.
		ports, err := freePorts(3)
		if err != nil {
			return err
		}
		listen := chartListen
		metrics := strings.Replace(chartMetrics, "0.0.0.0:", "127.0.0.1:", 1)
		if i > 0 {
			listen = fmt.Sprintf("127.0.0.1:%d", ports[0])
			metrics = fmt.Sprintf("127.0.0.1:%d", ports[1])
		}
		fmt.Sscanf(metrics, "127.0.0.1:%d", &s.metricsPort)
		fmt.Sscanf(listen, "127.0.0.1:%d", &s.extenderPort)
		mine := map[string]any{}
		for k, v := range ext {
			mine[k] = v
		}
		mine["metricsListen"] = metrics
		extPath := filepath.Join(b.dir, fmt.Sprintf("scheduler-%d", i), "extender.yaml")
		if err := writeYAML(extPath, mine); err != nil {
			return err
		}
		raw, _ := json.Marshal(sc)
		var mySc map[string]any
		_ = json.Unmarshal(raw, &mySc)
		mySc["clientConnection"] = map[string]any{"kubeconfig": b.schedulerKubeconfig}
		e := mySc["extenders"].([]any)[0].(map[string]any)
		e["urlPrefix"] = strings.Replace(urlPrefix, chartListen, listen, 1)
		schedPath := filepath.Join(b.dir, fmt.Sprintf("scheduler-%d", i), "scheduler-config.yaml")
		if err := writeYAML(schedPath, mySc); err != nil {
			return err
		}
		s.extenderArgs = mapArgs(s.extenderArgs, func(a string) string {
			switch {
			case a == "gpupack-extender":
				return b.binaries["extender"]
			case a == "/etc/gpupack/extender.yaml":
				return extPath
			case a == chartListen:
				return listen
			}
			return ""
		})
		s.extenderArgs = append(s.extenderArgs, "--kubeconfig", b.schedulerKubeconfig)
		s.kubeSchedArgs = mapArgs(s.kubeSchedArgs, func(a string) string {
			switch {
			case a == "kube-scheduler":
				return filepath.Join(b.bin, "kube-scheduler")
			case strings.HasPrefix(a, "--config="):
				return "--config=" + schedPath
			case strings.HasPrefix(a, "--secure-port="):
				return fmt.Sprintf("--secure-port=%d", ports[2])
			}
			return ""
		})
		// Out of cluster: the delegated authn/authz of kube-scheduler's /metrics and /healthz use
		// the same ServiceAccount (the chart's authentication-reader RoleBinding is exercised).
		s.kubeSchedArgs = append(s.kubeSchedArgs, "--bind-address=127.0.0.1",
			"--authentication-kubeconfig="+b.schedulerKubeconfig, "--authorization-kubeconfig="+b.schedulerKubeconfig)
		if err := b.startExtender(i); err != nil {
			return err
		}
		if err := b.startKubeScheduler(i); err != nil {
			return err
		}
		if i == 0 {
			// Replica 0 leads before replica 1 starts, so the scenarios know who is active.
			if _, err := b.waitLeaderChange(""); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeYAML(path string, v any) error {
	raw, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	return writeFile(path, raw)
}

func (b *bed) startExtender(i int) error {
	s := b.scheduler[i]
	p, err := startProc(b.logDir, fmt.Sprintf("extender-%d", i), s.extenderArgs, nil)
	if err != nil {
		return err
	}
	s.extender = p
	return waitFor(30*time.Second, 100*time.Millisecond, fmt.Sprintf("extender-%d /readyz", i), func() (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("extender-%d exited: %s", i, p.tail(15))
		}
		r, err := (&http.Client{Timeout: time.Second}).Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", s.metricsPort))
		if err != nil {
			return false, err
		}
		r.Body.Close()
		return r.StatusCode == 200, nil
	})
}

func (b *bed) startKubeScheduler(i int) error {
	p, err := startProc(b.logDir, fmt.Sprintf("kube-scheduler-%d", i), b.scheduler[i].kubeSchedArgs, nil)
	if err != nil {
		return err
	}
	b.scheduler[i].kubeScheduler = p
	return nil
}

// leaseHolder is the holder of kube-scheduler's Lease (named after schedulerName, in the
// release namespace, as the chart configures it).
func (b *bed) leaseHolder() (string, error) {
	c, cancel := ctx(5 * time.Second)
	defer cancel()
	l, err := b.kc.CoordinationV1().Leases(releaseNS).Get(c, b.schedName, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if l.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *l.Spec.HolderIdentity, nil
}

// leaderIndex is the replica whose running kube-scheduler acquired the Lease (its log since its
// last start says so; every replica runs on this host, so the Lease's holder identity,
// hostname_UUID, does not tell them apart), or -1 while none has.
func (b *bed) leaderIndex() int {
	for i, s := range b.scheduler {
		if s.kubeScheduler.exited() {
			continue
		}
		raw, err := os.ReadFile(s.kubeScheduler.logPath)
		if err != nil {
			continue
		}
		log := string(raw)
		if at := strings.LastIndex(log, "\n=== "); at >= 0 {
			log = log[at:]
		}
		if strings.Contains(log, "successfully acquired lease") {
			return i
		}
	}
	return -1
}

// makeReplica0Lead starts a kube-scheduler that exited and restarts the other replica's if it
// leads (after a fault scenario either may), so a scenario that kills replica 0 kills the leader.
func (b *bed) makeReplica0Lead(t *testing.T) {
	t.Helper()
	for i, s := range b.scheduler {
		if s.kubeScheduler.exited() { // the kubelet's part, as in the fault scenarios
			if err := b.startKubeScheduler(i); err != nil {
				t.Fatalf("restart kube-scheduler-%d: %v", i, err)
			}
		}
	}
	if err := waitFor(time.Minute, 250*time.Millisecond, "a kube-scheduler leading", func() (bool, error) {
		return b.leaderIndex() >= 0, nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := range b.scheduler {
		if i == 0 || b.leaderIndex() != i {
			continue
		}
		holder, err := b.leaseHolder()
		if err != nil {
			t.Fatal(err)
		}
		b.scheduler[i].kubeScheduler.kill9()
		if _, err := b.waitLeaderChange(holder); err != nil {
			t.Fatal(err)
		}
		if err := b.startKubeScheduler(i); err != nil {
			t.Fatalf("restart kube-scheduler-%d: %v", i, err)
		}
	}
	if err := waitFor(time.Minute, 250*time.Millisecond, "kube-scheduler-0 leading", func() (bool, error) {
		return b.leaderIndex() == 0, nil
	}); err != nil {
		t.Fatal(err)
	}
}

func (b *bed) waitLeaderChange(from string) (string, error) {
	var holder string
	err := waitFor(60*time.Second, 250*time.Millisecond, "kube-scheduler Lease "+releaseNS+"/"+b.schedName+" held by a new leader", func() (bool, error) {
		for i, s := range b.scheduler {
			if s.kubeScheduler != nil && s.kubeScheduler.exited() && i == 0 && from == "" {
				return false, fmt.Errorf("kube-scheduler-%d exited: %s", i, s.kubeScheduler.tail(20))
			}
		}
		h, err := b.leaseHolder()
		if err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, err
		}
		holder = h
		return h != "" && h != from, nil
	})
	return holder, err
}

// ---- small helpers ------------------------------------------------------------------------------

func unstructuredSlice(obj map[string]any, path ...string) ([]any, bool, error) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = m[p]
	}
	s, ok := cur.([]any)
	return s, ok, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
