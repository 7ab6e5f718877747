package main

// The built gpupack-nri binary (GPUPACK_NRI, set by CMake) against the runtime side of NRI,
// github.com/containerd/nri/pkg/adaptation, which containerd and CRI-O embed: the test plays the
// runtime as containerd/nri's own adaptation_suite_test.go does (adaptation.New, Start,
// RunPodSandbox, CreateContainer, a SyncFn that lists the runtime's pods and containers). A second
// plugin registered after gpupack (index 99, on pkg/stub) receives the container as
// pkg/adaptation passes it on after gpupack's adjustment: the env the container is created with.

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
)

const waitLimit = 10 * time.Second

// testRuntime is pkg/adaptation with the pods and containers a runtime would list to a plugin
// that registers.
type testRuntime struct {
	nri        *adaptation.Adaptation
	socket     string
	synced     chan struct{} // one entry per plugin registration the runtime synchronized
	mu         sync.Mutex
	pods       []*api.PodSandbox
	containers []*api.Container // listed to a plugin that registers, as already running
}

// shortTempDir is a directory for sockets: not t.TempDir(), a unix socket path must stay under
// 108 bytes.
func shortTempDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "gpupack-nri-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startRuntime serves NRI on dir/nri.sock.
func startRuntime(t *testing.T, dir string) *testRuntime {
	var err error
	r := &testRuntime{socket: filepath.Join(dir, "nri.sock"), synced: make(chan struct{}, 16)}
	syncFn := func(ctx context.Context, cb adaptation.SyncCB) error {
		r.mu.Lock()
		pods := append([]*api.PodSandbox(nil), r.pods...)
		containers := append([]*api.Container(nil), r.containers...)
		r.mu.Unlock()
		_, err := cb(ctx, pods, containers)
		r.synced <- struct{}{}
		return err
	}
	updateFn := func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil }
	r.nri, err = adaptation.New("gpupack-test-runtime", "0.1.0", syncFn, updateFn,
		adaptation.WithPluginPath(filepath.Join(dir, "plugins")),
		adaptation.WithPluginConfigPath(filepath.Join(dir, "conf.d")),
		adaptation.WithSocketPath(r.socket))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.nri.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.nri.Stop)
	r.waitSynced(t) // Start synchronizes the pre-installed plugins (none) once
	return r
}

// waitSynced waits for the next plugin registration to complete.
func (r *testRuntime) waitSynced(t *testing.T) {
	t.Helper()
	select {
	case <-r.synced:
	case <-time.After(waitLimit):
		t.Fatal("no plugin registered with the runtime")
	}
	r.nri.BlockPluginSync().Unblock() // the registration is complete once no sync holds the lock
}

func (r *testRuntime) runPod(t *testing.T, pod *api.PodSandbox) {
	t.Helper()
	r.mu.Lock()
	r.pods = append(r.pods, pod)
	r.mu.Unlock()
	if err := r.nri.RunPodSandbox(context.Background(), &api.RunPodSandboxRequest{Pod: pod}); err != nil {
		t.Fatal(err)
	}
}

func (r *testRuntime) createContainer(pod *api.PodSandbox, ctr *api.Container) (*api.CreateContainerResponse, error) {
	ctr.PodSandboxId = pod.Id
	return r.nri.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: pod, Container: ctr})
}

// earlier is a plugin before gpupack (index 10) that hands every container every GPU.
type earlier struct{}

func (earlier) CreateContainer(context.Context, *api.PodSandbox, *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	adjust := &api.ContainerAdjustment{}
	adjust.AddEnv("NVIDIA_VISIBLE_DEVICES", "all")
	return adjust, nil, nil
}

// observer is the plugin after gpupack: it records the env each container reaches it with.
type observer struct {
	mu  sync.Mutex
	env map[string][]string
}

func (o *observer) CreateContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.env[ctr.Id] = append([]string(nil), ctr.Env...)
	return nil, nil, nil
}

func (o *observer) envOf(id string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.env[id]
}

// startStubPlugin registers `p` (on pkg/stub, in this process) with the runtime.
func startStubPlugin(t *testing.T, r *testRuntime, p stub.Plugin, name, index string) {
	s, err := stub.New(p, stub.WithPluginName(name), stub.WithPluginIdx(index), stub.WithSocketPath(r.socket))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	r.waitSynced(t)
}

func startObserver(t *testing.T, r *testRuntime) *observer {
	o := &observer{env: map[string][]string{}}
	startStubPlugin(t, r, o, "observer", "99")
	return o
}

// syncBuffer is the plugin's log, written by its process and read by the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// gpupackPlugin is one run of the gpupack-nri binary.
type gpupackPlugin struct {
	cmd    *exec.Cmd
	listen string
	log    *syncBuffer
}

func startPlugin(t *testing.T, socket string, extra ...string) *gpupackPlugin {
	t.Helper()
	bin := os.Getenv("GPUPACK_NRI")
	if bin == "" {
		t.Fatal("GPUPACK_NRI must name the gpupack-nri binary (CTest sets it)")
	}
	p := &gpupackPlugin{log: &syncBuffer{}}
	args := append([]string{"--socket", socket, "--listen", "127.0.0.1:0", "--retry", "100ms",
		"--exempt-namespace", "kube-system", "--exempt-namespace", "gpu-operator"}, extra...)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stderr = p.log
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.stop()
		t.Logf("gpupack-nri log:\n%s", p.log)
	})
	// The first stdout line is the address it bound (docs/design.md "Command lines").
	lines := bufio.NewReader(stdout)
	addr, err := lines.ReadString('\n')
	if err != nil {
		t.Fatalf("gpupack-nri printed no address: %v\n%s", err, p.log)
	}
	p.listen = strings.TrimSpace(addr)
	go io.Copy(p.log, lines)
	return p
}

func (p *gpupackPlugin) stop() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.cmd.Wait()
	}
}

func (p *gpupackPlugin) get(path string) (int, string) {
	resp, err := http.Get("http://" + p.listen + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// waitFor polls `path` until its body contains `want`.
func (p *gpupackPlugin) waitFor(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		_, body := p.get(path)
		if strings.Contains(body, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never said %q; last:\n%s\nlog:\n%s", path, want, body, p.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A pod as the extender bound it with requestRatio 0.5 (api::AllocationAnnotations): "main" on
// GPU-a and GPU-b with an 8192-MiB cap each, soft 8192 × 0.5 = 4096, and compute shares of 30 % and
// 25 % (its MPS thread percentage is the lesser, 25); sidecar "log" has no allocation. The
// annotations are the ones kubelet copies onto the sandbox.
func boundPod(id string) *api.PodSandbox {
	return &api.PodSandbox{Id: id, Name: "train-" + id, Uid: "uid-" + id, Namespace: "ml", Annotations: map[string]string{
		"gpupack.io/allocation": `{"v":1,"node":"n1","containers":[{"name":"main","index":0,"devices":` +
			`[{"uuid":"GPU-a","index":0,"memMiB":8192,"computePct":30},{"uuid":"GPU-b","index":1,"memMiB":8192,"computePct":25}]}]}`,
		"gpupack.io/c0-visible-devices":    "GPU-a,GPU-b",
		"gpupack.io/c0-memory-limit-mib":   "8192",
		"gpupack.io/c0-memory-request-mib": "4096",
		"gpupack.io/c0-mps-memory-limit":   "0=8192M,1=8192M",
	}}
}

// The env of "main" as the decision gives it, after the entries the container keeps.
var mainEnv = []string{
	"NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b",
	"NVIDIA_GPU_MEMORY_LIMIT=8192",
	"NVIDIA_GPU_MEMORY_REQUEST=4096",
	"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=8192M,1=8192M",
	"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25",
	"CUDA_MPS_CLIENT_PRIORITY=0",
}

func adjustedEnv(resp *api.CreateContainerResponse) []string {
	var out []string
	for _, kv := range resp.GetAdjust().GetEnv() {
		out = append(out, kv.Key+"="+kv.Value)
	}
	return out
}

func expectEnv(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got  %q\n want %q", what, got, want)
	}
}

func TestContainerEnvIsDecidedOnTheNode(t *testing.T) {
	r := startRuntime(t, shortTempDir(t))
	o := startObserver(t, r)
	p := startPlugin(t, r.socket)
	r.waitSynced(t)
	p.waitFor(t, "/metrics", "gpupack_nri_connected 1")
	pod := boundPod("p1")
	r.runPod(t, pod)

	t.Run("a container with an allocation gets exactly the decided env", func(t *testing.T) {
		// NVIDIA's CUDA images set NVIDIA_VISIBLE_DEVICES=all; an envFrom ConfigMap sets an MPS pipe.
		resp, err := r.createContainer(pod, &api.Container{Id: "c-main", Name: "main",
			Env: []string{"PATH=/usr/bin", "NVIDIA_VISIBLE_DEVICES=all", "CUDA_MPS_PIPE_DIRECTORY=/tmp/elsewhere"}})
		if err != nil {
			t.Fatal(err)
		}
		withPipe := append(append([]string(nil), mainEnv...), "CUDA_MPS_PIPE_DIRECTORY=")
		expectEnv(t, "the adjustment the runtime applies", adjustedEnv(resp), withPipe)
		expectEnv(t, "the env after gpupack", o.envOf("c-main"), append([]string{"PATH=/usr/bin"}, withPipe...))
	})

	t.Run("a container without an allocation that sets NVIDIA_VISIBLE_DEVICES=all itself gets none", func(t *testing.T) {
		resp, err := r.createContainer(pod, &api.Container{Id: "c-log", Name: "log",
			Env: []string{"NVIDIA_VISIBLE_DEVICES=all", "HOME=/root"}})
		if err != nil {
			t.Fatal(err)
		}
		expectEnv(t, "the adjustment the runtime applies", adjustedEnv(resp), []string{"NVIDIA_VISIBLE_DEVICES=void"})
		expectEnv(t, "the env after gpupack", o.envOf("c-log"), []string{"HOME=/root", "NVIDIA_VISIBLE_DEVICES=void"})

		plain := &api.PodSandbox{Id: "p2", Name: "cpu-only", Uid: "uid-p2", Namespace: "ml"}
		r.runPod(t, plain)
		if _, err := r.createContainer(plain, &api.Container{Id: "c-plain", Name: "app",
			Env: []string{"NVIDIA_GPU_MEMORY_LIMIT=999999", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=999999M"}}); err != nil {
			t.Fatal(err)
		}
		expectEnv(t, "the env after gpupack", o.envOf("c-plain"),
			[]string{"NVIDIA_VISIBLE_DEVICES=void", "NVIDIA_GPU_MEMORY_LIMIT=", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="})

		// A container that says itself it takes no device keeps that: nothing to set.
		resp, err = r.createContainer(plain, &api.Container{Id: "c-none", Name: "tools", Env: []string{"NVIDIA_VISIBLE_DEVICES=none"}})
		if err != nil {
			t.Fatal(err)
		}
		expectEnv(t, "the adjustment the runtime applies", adjustedEnv(resp), nil)
		expectEnv(t, "the env after gpupack", o.envOf("c-none"), []string{"NVIDIA_VISIBLE_DEVICES=none"})
	})

	t.Run("GPU infrastructure in an exempt namespace keeps its env", func(t *testing.T) {
		plugin := &api.PodSandbox{Id: "p4", Name: "nvidia-device-plugin", Uid: "uid-p4", Namespace: "gpu-operator"}
		r.runPod(t, plugin)
		resp, err := r.createContainer(plugin, &api.Container{Id: "c-dp", Name: "plugin", Env: []string{"NVIDIA_VISIBLE_DEVICES=all"}})
		if err != nil {
			t.Fatal(err)
		}
		expectEnv(t, "the adjustment the runtime applies", adjustedEnv(resp), nil)
		expectEnv(t, "the env after gpupack", o.envOf("c-dp"), []string{"NVIDIA_VISIBLE_DEVICES=all"})
	})

	t.Run("an allocation that does not decode fails the creation, naming it", func(t *testing.T) {
		forged := &api.PodSandbox{Id: "p3", Name: "forged", Uid: "uid-p3", Namespace: "ml",
			Annotations: map[string]string{"gpupack.io/allocation": `{"v":1,"node":`}}
		r.runPod(t, forged)
		_, err := r.createContainer(forged, &api.Container{Id: "c-forged", Name: "main"})
		if err == nil || !strings.Contains(err.Error(), "ml/forged container main: gpupack.io/allocation: ") {
			t.Fatalf("want the creation refused naming the pod and the annotation, got %v", err)
		}
		if o.envOf("c-forged") != nil {
			t.Error("the refused container reached the next plugin")
		}
	})

	code, body := p.get("/metrics")
	for _, want := range []string{"gpupack_nri_socket_present 1", `gpupack_nri_containers_total{result="adjusted"} 3`,
		`gpupack_nri_containers_total{result="unchanged"} 1`, `gpupack_nri_containers_total{result="exempt"} 1`, `gpupack_nri_containers_total{result="refused"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics (%d) lacks %q:\n%s", code, want, body)
		}
	}
	if code, _ := p.get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz answered %d while registered", code)
	}
}

// With the node's MPS pipe directory configured, the runtime mounts it into a container with
// gpupack devices and points CUDA_MPS_PIPE_DIRECTORY at it, replacing the pod's own: its thread
// percentage reaches the node's MPS server without a hostPath in the pod spec. A sidecar gets
// neither.
func TestMpsPipeDirectoryReachesAllocatedContainersOnly(t *testing.T) {
	r := startRuntime(t, shortTempDir(t))
	o := startObserver(t, r)
	p := startPlugin(t, r.socket, "--mps-pipe-directory", "/run/nvidia-mps")
	r.waitSynced(t)
	p.waitFor(t, "/metrics", "gpupack_nri_connected 1")
	pod := boundPod("p1")
	r.runPod(t, pod)
	resp, err := r.createContainer(pod, &api.Container{Id: "c-main", Name: "main",
		Env: []string{"CUDA_MPS_PIPE_DIRECTORY=/tmp/mine"}})
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]string(nil), mainEnv...), "CUDA_MPS_PIPE_DIRECTORY=/run/nvidia-mps")
	expectEnv(t, "the env after gpupack", o.envOf("c-main"), want)
	mounts := resp.GetAdjust().GetMounts()
	if len(mounts) != 1 || mounts[0].Destination != "/run/nvidia-mps" || mounts[0].Source != "/run/nvidia-mps" ||
		mounts[0].Type != "bind" {
		t.Errorf("want one bind mount of /run/nvidia-mps, got %v", mounts)
	}
	side, err := r.createContainer(pod, &api.Container{Id: "c-log", Name: "log"})
	if err != nil {
		t.Fatal(err)
	}
	if len(side.GetAdjust().GetMounts()) != 0 {
		t.Errorf("the sidecar got mounts: %v", side.GetAdjust().GetMounts())
	}
}

// The plugin restarts between the pod's sandbox and its container: the new process decides from
// what the runtime hands it at CreateContainer, so nothing is lost.
func TestPluginRestartBetweenSandboxAndContainerLosesNothing(t *testing.T) {
	r := startRuntime(t, shortTempDir(t))
	o := startObserver(t, r)
	first := startPlugin(t, r.socket)
	r.waitSynced(t)
	pod := boundPod("p1")
	r.runPod(t, pod)

	first.stop()
	second := startPlugin(t, r.socket)
	r.waitSynced(t)
	second.waitFor(t, "/metrics", "gpupack_nri_connected 1")
	if !strings.Contains(second.log.String(), "1 pods") {
		t.Errorf("the restarted plugin was not synchronized with the running pod:\n%s", second.log)
	}

	resp, err := r.createContainer(pod, &api.Container{Id: "c-main", Name: "main", Env: []string{"NVIDIA_VISIBLE_DEVICES=all"}})
	if err != nil {
		t.Fatal(err)
	}
	expectEnv(t, "the adjustment the runtime applies", adjustedEnv(resp), mainEnv)
	expectEnv(t, "the env after gpupack", o.envOf("c-main"), mainEnv)
}

// A plugin before gpupack that sets a device variable is overridden, not a conflict that fails
// the creation.
func TestAnEarlierPluginsDeviceEnvIsOverridden(t *testing.T) {
	r := startRuntime(t, shortTempDir(t))
	startStubPlugin(t, r, earlier{}, "every-gpu", "10")
	o := startObserver(t, r)
	startPlugin(t, r.socket)
	r.waitSynced(t)
	pod := boundPod("p1")
	r.runPod(t, pod)
	for _, c := range []struct {
		name string
		want []string
	}{{"main", mainEnv}, {"log", []string{"NVIDIA_VISIBLE_DEVICES=void"}}} {
		resp, err := r.createContainer(pod, &api.Container{Id: "c-" + c.name, Name: c.name})
		if err != nil {
			t.Fatal(err)
		}
		expectEnv(t, c.name+": the adjustment the runtime applies", adjustedEnv(resp), c.want)
		expectEnv(t, c.name+": the env after gpupack", o.envOf("c-"+c.name), c.want)
	}
}

// Without the runtime's socket the plugin says so in its log and in /metrics, and is not ready;
// it registers once the socket appears.
func TestMissingSocketIsReportedNotSilent(t *testing.T) {
	dir := shortTempDir(t)
	p := startPlugin(t, filepath.Join(dir, "nri.sock"))
	p.waitFor(t, "/metrics", "gpupack_nri_socket_present 0")
	if code, _ := p.get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz answered %d without a socket, want 503", code)
	}
	p.waitFor(t, "/healthz", "ok")
	deadline := time.Now().Add(waitLimit)
	for log := p.log.String(); !strings.Contains(log, dir+"/nri.sock") || !strings.Contains(log, "containerd 1.7 needs disable = false"); log = p.log.String() {
		if time.Now().After(deadline) {
			t.Fatalf("the log does not say which socket is missing and how to turn NRI on:\n%s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}

	r := startRuntime(t, dir)
	r.waitSynced(t)
	p.waitFor(t, "/metrics", "gpupack_nri_connected 1")
	p.waitFor(t, "/readyz", "ok")
}

// fakeMpsDaemon is a pipe directory of the stand-in MPS control CLI (agent/testing/
// fake_mps_control.sh, GPUPACK_FAKE_MPS_CONTROL set by CTest) with one server, "shared".
type fakeMpsDaemon struct{ dir, binary string }

func startFakeMpsDaemon(t *testing.T) fakeMpsDaemon {
	d := fakeMpsDaemon{dir: shortTempDir(t), binary: os.Getenv("GPUPACK_FAKE_MPS_CONTROL")}
	if d.binary == "" {
		t.Fatal("GPUPACK_FAKE_MPS_CONTROL must name the stand-in MPS control CLI (CTest sets it)")
	}
	for _, f := range []string{"control", "fake-state/servers/shared"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(d.dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d.dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// namespace is the state directory of namespace ns ("" when the glob matches none).
func (d fakeMpsDaemon) namespace(t *testing.T, glob string) string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(d.dir, "fake-state/shared", glob))
	if err != nil || len(matches) > 1 {
		t.Fatalf("namespaces matching %s: %v %v", glob, matches, err)
	}
	if len(matches) == 0 {
		return ""
	}
	return matches[0]
}

func (d fakeMpsDaemon) percent(t *testing.T, nsDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(nsDir, "percent"))
	if err != nil {
		t.Fatalf("the namespace %s was never capped: %v", nsDir, err)
	}
	return strings.TrimSpace(string(b))
}

// With an MPS v3 server named, each container with gpupack devices gets a namespace of its own
// capped at its share (main: 30 % and 25 % → 25), sees only that namespace's pipe directory, and
// the namespace goes once the container stops and its client detaches. At registration the plugin
// reconciles the daemon with what the runtime runs: it restores the namespace of a running
// container the daemon lost, deletes a namespace of a container that is gone and caps default.
func TestMpsNamespacePerContainer(t *testing.T) {
	mps := startFakeMpsDaemon(t)
	gone := filepath.Join(mps.dir, "fake-state/shared/gpupack_gone_0123456789abcdef")
	if err := os.MkdirAll(gone, 0o755); err != nil {
		t.Fatal(err)
	}
	r := startRuntime(t, shortTempDir(t))
	o := startObserver(t, r)
	pod := boundPod("p1")
	r.runPod(t, pod)
	r.mu.Lock()
	r.containers = []*api.Container{{Id: "c-old", PodSandboxId: pod.Id, Name: "main"}}
	r.mu.Unlock()

	p := startPlugin(t, r.socket, "--mps-pipe-directory", mps.dir, "--mps-server", "shared",
		"--mps-control-binary", mps.binary, "--mps-release-retry", "100ms")
	r.waitSynced(t)
	p.waitFor(t, "/metrics", "gpupack_nri_mps_namespace_releases_pending 0")
	if old := mps.namespace(t, "gpupack_c_old_*"); old == "" || mps.percent(t, old) != "25" {
		t.Errorf("the running container's lost namespace was not restored at 25 %%: %q", old)
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("the namespace of a container that is gone was kept: %v", err)
	}
	if got := mps.percent(t, filepath.Join(mps.dir, "fake-state/shared/default")); got != "10" {
		t.Errorf("default namespace capped at %s, want 10", got)
	}

	resp, err := r.createContainer(pod, &api.Container{Id: "c-main", Name: "main",
		Env: []string{"CUDA_MPS_PIPE_DIRECTORY=" + mps.dir}})
	if err != nil {
		t.Fatal(err)
	}
	ns := mps.namespace(t, "gpupack_c_main_*")
	if ns == "" || mps.percent(t, ns) != "25" {
		t.Fatalf("c-main's namespace %q missing or not capped at 25 %%", ns)
	}
	pipe := filepath.Join(mps.dir, "shared", filepath.Base(ns))
	want := append(append([]string(nil), mainEnv...), "CUDA_MPS_PIPE_DIRECTORY="+pipe)
	expectEnv(t, "the env after gpupack", o.envOf("c-main"), want)
	mounts := resp.GetAdjust().GetMounts()
	if len(mounts) != 1 || mounts[0].Source != pipe || mounts[0].Destination != pipe {
		t.Errorf("want one bind mount of the namespace's %s alone, got %v", pipe, mounts)
	}
	side, err := r.createContainer(pod, &api.Container{Id: "c-log", Name: "log"})
	if err != nil {
		t.Fatal(err)
	}
	if len(side.GetAdjust().GetMounts()) != 0 || mps.namespace(t, "gpupack_c_log_*") != "" {
		t.Errorf("the sidecar got a namespace or mounts: %v", side.GetAdjust().GetMounts())
	}

	// Its client is still attached when it stops: the release waits, then goes.
	if err := os.WriteFile(filepath.Join(ns, "attached"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.nri.StopContainer(context.Background(), &api.StopContainerRequest{Pod: pod,
		Container: &api.Container{Id: "c-main", PodSandboxId: pod.Id, Name: "main"}}); err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, "/metrics", "gpupack_nri_mps_namespace_releases_pending 1")
	if err := os.Remove(filepath.Join(ns, "attached")); err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, "/metrics", "gpupack_nri_mps_namespace_releases_pending 0")
	if _, err := os.Stat(ns); !os.IsNotExist(err) {
		t.Errorf("the stopped container's namespace is still there: %v", err)
	}
}

// A namespace the MPS daemon refuses fails the container's creation: it is never created with no
// cap.
func TestRefusedMpsNamespaceFailsTheCreation(t *testing.T) {
	mps := startFakeMpsDaemon(t)
	r := startRuntime(t, shortTempDir(t))
	p := startPlugin(t, r.socket, "--mps-pipe-directory", mps.dir, "--mps-server", "no-such-server",
		"--mps-control-binary", mps.binary)
	r.waitSynced(t)
	p.waitFor(t, "/metrics", "gpupack_nri_connected 1")
	pod := boundPod("p1")
	r.runPod(t, pod)
	_, err := r.createContainer(pod, &api.Container{Id: "c-main", Name: "main"})
	if err == nil || !strings.Contains(err.Error(), "Server 'no-such-server' not found") {
		t.Errorf("want the creation refused with the daemon's reason, got %v", err)
	}
	p.waitFor(t, "/metrics", `gpupack_nri_containers_total{result="refused"} 1`)
}

// A daemon that does not answer fails the creation within the runtime's deadline for the request,
// with the plugin's own message rather than a timeout, and the plugin stays registered.
func TestSlowMpsDaemonFailsTheCreationInTimeAndKeepsThePlugin(t *testing.T) {
	mps := startFakeMpsDaemon(t)
	slow := filepath.Join(mps.dir, "slow.sh")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := startRuntime(t, shortTempDir(t))
	p := startPlugin(t, r.socket, "--mps-pipe-directory", mps.dir, "--mps-server", "shared",
		"--mps-control-binary", slow, "--mps-default-namespace-percentage", "0")
	r.waitSynced(t)
	p.waitFor(t, "/metrics", "gpupack_nri_connected 1")
	pod := boundPod("p1")
	r.runPod(t, pod)
	for _, id := range []string{"c-1", "c-2"} {
		start := time.Now()
		_, err := r.createContainer(pod, &api.Container{Id: id, Name: "main"})
		if err == nil || !strings.Contains(err.Error(), "no answer within") {
			t.Errorf("%s: want the creation refused for the daemon's silence, got %v", id, err)
		}
		if took := time.Since(start); took > adaptation.DefaultPluginRequestTimeout {
			t.Errorf("%s: the refusal took %s, past the runtime's %s deadline", id, took, adaptation.DefaultPluginRequestTimeout)
		}
	}
	p.waitFor(t, "/metrics", `gpupack_nri_containers_total{result="refused"} 2`)
	p.waitFor(t, "/metrics", "gpupack_nri_connected 1")
}
