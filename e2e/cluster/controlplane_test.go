package cluster

// The control plane of the `cluster` suite: etcd and kube-apiserver on loopback (TLS, RBAC,
// service-account tokens), kube-controller-manager with the ReplicaSet and disruption controllers
// (what recreates an evicted pod and keeps PodDisruptionBudgets' status), real child processes
// that never outlive the test, and kubeconfigs per identity. Everything waits with a deadline; nothing here can hang the suite.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a child process in its own process group, killed with the group at teardown, its
// output in <dir>/logs/<name>.log.
type proc struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
	mu      sync.Mutex
	waitErr error
}

func startProc(logDir, name string, args []string, env []string) (*proc, error) {
	logPath := filepath.Join(logDir, name+".log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), env...)
	// Own group (teardown kills it whole) and SIGKILL if this test process dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(log, "=== %s %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		log.Close()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill9 is `kill -9` of the whole group; it returns once the process is reaped.
func (p *proc) kill9() {
	if p == nil || p.exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

// stop asks politely (SIGTERM), then kills after `grace`.
func (p *proc) stop(grace time.Duration) {
	if p == nil || p.exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill9()
	}
}

func (p *proc) tail(lines int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// freePort returns a loopback port nobody listens on now (bound then released: the components
// take ports from flags and config files, not from a listener we could hand them).
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func freePorts(n int) ([]int, error) {
	seen := map[int]bool{}
	var out []int
	for len(out) < n {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}

// waitFor polls `cond` every `every` until it returns true, returns an error, or `timeout` passes.
func waitFor(timeout, every time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			lastErr = err
		}
		if time.Now().After(deadline) {
			if lastErr != nil {
				return fmt.Errorf("timed out after %s waiting for %s (last error: %v)", timeout, what, lastErr)
			}
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(every)
	}
}

// ---- certificates ---------------------------------------------------------------------------

type keyPair struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

func newKey() (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

var serial int64 = 1

func issue(tmpl *x509.Certificate, ca *keyPair) (*keyPair, error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, err
	}
	serial++
	tmpl.SerialNumber = big.NewInt(serial)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	parent, signer := tmpl, key
	if ca != nil {
		parent, signer = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key, keyPEM: keyPEM,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

func newCA(name string) (*keyPair, error) {
	return issue(&x509.Certificate{Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}, nil)
}

// newServing issues a serving certificate for `dns`, 127.0.0.1 and `ips`.
func newServing(ca *keyPair, cn string, dns []string, ips ...net.IP) (*keyPair, error) {
	return issue(&x509.Certificate{Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
		IPAddresses: append([]net.IP{net.ParseIP("127.0.0.1")}, ips...),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca)
}

func newClient(ca *keyPair, user string, groups []string) (*keyPair, error) {
	return issue(&x509.Certificate{Subject: pkix.Name{CommonName: user, Organization: groups},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca)
}

// ---- etcd and kube-apiserver ---------------------------------------------------------------

type controlPlane struct {
	dir, logDir string
	etcd        *proc
	etcdArgs    []string // etcd's command line, for restarts
	etcdURL     string   // http://127.0.0.1:PORT, its client URL
	apiserver   *proc
	apiArgs     []string // kube-apiserver's command line, for restarts
	controllers *proc    // kube-controller-manager
	server      string   // https://127.0.0.1:PORT
	ca          *keyPair
	admin       string // kubeconfig path: system:masters client certificate
}

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// kubeconfig writes a kubeconfig for `server` with either a client certificate or a token.
func kubeconfig(path, server string, caPEM []byte, client *keyPair, token string) error {
	var user, namespace string
	if client != nil {
		user = fmt.Sprintf("    client-certificate-data: %s\n    client-key-data: %s\n", b64(client.certPEM), b64(client.keyPEM))
	} else {
		// A ServiceAccount token stands for a pod of the release, whose namespace it is (what the
		// extender's in-cluster config reads): the bind fence's Leases live there.
		user = fmt.Sprintf("    token: %s\n", token)
		namespace = ", namespace: " + releaseNS
	}
	text := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: e2e
  user:
%scontexts:
- name: e2e
  context: {cluster: e2e, user: e2e%s}
current-context: e2e
`, server, b64(caPEM), user, namespace)
	return writeFile(path, []byte(text))
}

func startControlPlane(bin, dir string) (*controlPlane, error) {
	cp := &controlPlane{dir: dir, logDir: filepath.Join(dir, "logs")}
	if err := os.MkdirAll(cp.logDir, 0o755); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeer)
	cp.etcdURL = etcdURL
	cp.etcdArgs = []string{filepath.Join(bin, "etcd"),
		"--name", "e2e", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "e2e=" + peerURL, "--unsafe-no-fsync", "--log-level", "warn"}
	if cp.etcd, err = startProc(cp.logDir, "etcd", cp.etcdArgs, nil); err != nil {
		return cp, err
	}
	if err := waitEtcdHealthy(cp.etcd, cp.etcdURL); err != nil {
		return cp, err
	}

	pki := filepath.Join(dir, "pki")
	if cp.ca, err = newCA("gpupack-e2e-ca"); err != nil {
		return cp, err
	}
	serving, err := newServing(cp.ca, "kube-apiserver", []string{"localhost", "kubernetes", "kubernetes.default",
		"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return cp, err
	}
	_, saKeyPEM, err := newKey()
	if err != nil {
		return cp, err
	}
	admin, err := newClient(cp.ca, "e2e-admin", []string{"system:masters"})
	if err != nil {
		return cp, err
	}
	for name, data := range map[string][]byte{"ca.crt": cp.ca.certPEM, "apiserver.crt": serving.certPEM,
		"apiserver.key": serving.keyPEM, "sa.key": saKeyPEM} {
		if err := writeFile(filepath.Join(pki, name), data); err != nil {
			return cp, err
		}
	}
	cp.server = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	cp.admin = filepath.Join(dir, "admin.kubeconfig")
	if err := kubeconfig(cp.admin, cp.server, cp.ca.certPEM, admin, ""); err != nil {
		return cp, err
	}
	cp.apiArgs = []string{filepath.Join(bin, "kube-apiserver"),
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", fmt.Sprint(apiPort),
		"--cert-dir", filepath.Join(dir, "apiserver-certs"),
		"--tls-cert-file", filepath.Join(pki, "apiserver.crt"), "--tls-private-key-file", filepath.Join(pki, "apiserver.key"),
		"--client-ca-file", filepath.Join(pki, "ca.crt"),
		"--authorization-mode", "Node,RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", filepath.Join(pki, "sa.key"),
		"--service-account-signing-key-file", filepath.Join(pki, "sa.key"),
		"--service-cluster-ip-range", "10.96.0.0/16",
		"--allow-privileged=true", "--profiling=false", "--v=1"}
	if cp.apiserver, err = startProc(cp.logDir, "kube-apiserver", cp.apiArgs, nil); err != nil {
		return cp, err
	}
	if err := cp.waitAPIServerReady(); err != nil {
		return cp, err
	}
	// Only the controllers the scenarios lean on: the rest (service accounts, namespaces, nodes)
	// would act on a bed whose nodes have no kubelet. No serving port: nothing scrapes it.
	cp.controllers, err = startProc(cp.logDir, "kube-controller-manager", []string{
		filepath.Join(bin, "kube-controller-manager"), "--kubeconfig", cp.admin,
		"--controllers", "replicaset-controller,disruption-controller", "--leader-elect=false",
		"--secure-port", "0", "--v=1"}, nil)
	return cp, err
}

// restartAPIServer is `kill -9` of kube-apiserver, `down` without one, and a start with the same
// flags (port, certificates, etcd) until /readyz answers: what an upgrade or a crash-looping
// static pod does to every client.
func (cp *controlPlane) restartAPIServer(down time.Duration) error {
	return cp.restart(&cp.apiserver, "kube-apiserver", cp.apiArgs, down, nil, cp.waitAPIServerReady)
}

// restartEtcdCompacted is `kill -9` of etcd, `down` without it for kube-apiserver (which answers
// 5xx, its watch cache losing its source), and a start on the same data directory until /health
// answers, its history compacted past every revision kube-apiserver saw before the outage. The
// compaction is made while etcd serves only a private client port, so kube-apiserver's watch
// cache cannot resume before it: its resume is refused as compacted, it relists and ends its
// watchers, and a client resuming from before the outage is told 410 Gone (the cache now starts
// at the relist's revision, which the compaction marker moved past every older one), as after a
// long outage on a cluster whose API server compacts every 5 minutes. It returns the revision
// compacted to.
func (cp *controlPlane) restartEtcdCompacted(down time.Duration) (int64, error) {
	var rev int64
	compact := func() error {
		ports, err := freePorts(1)
		if err != nil {
			return err
		}
		privateURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		args := append([]string(nil), cp.etcdArgs...)
		for i := range args {
			if args[i] == cp.etcdURL {
				args[i] = privateURL
			}
		}
		private, err := startProc(cp.logDir, "etcd", args, nil)
		if err != nil {
			return err
		}
		defer private.stop(10 * time.Second)
		if err := waitEtcdHealthy(private, privateURL); err != nil {
			return err
		}
		rev, err = compactEtcd(privateURL)
		return err
	}
	err := cp.restart(&cp.etcd, "etcd", cp.etcdArgs, down, compact, func() error { return waitEtcdHealthy(cp.etcd, cp.etcdURL) })
	return rev, err
}

// restart is `kill -9` of *p, `whileDown` (nil: nothing) run in the outage, a start with `args`
// once `down` has passed since the kill, and `ready`. The process comes back even when whileDown
// failed, so the suite goes on; whileDown's error is returned first.
func (cp *controlPlane) restart(p **proc, name string, args []string, down time.Duration, whileDown, ready func() error) error {
	killed := time.Now()
	(*p).kill9()
	var downErr error
	if whileDown != nil {
		downErr = whileDown()
	}
	time.Sleep(time.Until(killed.Add(down)))
	var err error
	if *p, err = startProc(cp.logDir, name, args, nil); err == nil {
		err = ready()
	}
	if downErr != nil {
		return fmt.Errorf("%s while down: %w", name, downErr)
	}
	return err
}

func waitEtcdHealthy(etcd *proc, url string) error {
	return waitFor(30*time.Second, 100*time.Millisecond, "etcd /health", func() (bool, error) {
		if etcd.exited() {
			return false, fmt.Errorf("etcd exited: %s", etcd.tail(20))
		}
		r, err := http.Get(url + "/health")
		if err != nil {
			return false, err
		}
		r.Body.Close()
		return r.StatusCode == 200, nil
	})
}

// compactEtcd writes a key outside the API server's prefix twice and compacts the history of the
// etcd serving `url` up to that revision, through etcd's JSON gateway, so that a watch resuming
// from any earlier revision is refused as compacted. It returns the revision compacted to.
func compactEtcd(url string) (int64, error) {
	post := func(path, body string, out any) error {
		r, err := http.Post(url+path, "application/json", strings.NewReader(body))
		if err != nil {
			return err
		}
		defer r.Body.Close()
		raw, _ := io.ReadAll(r.Body)
		if r.StatusCode != 200 {
			return fmt.Errorf("etcd %s: %d %s", path, r.StatusCode, raw)
		}
		return json.Unmarshal(raw, out)
	}
	var put struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	marker := b64([]byte("/gpupack-e2e/compaction-marker"))
	for i := 0; i < 2; i++ {
		if err := post("/v3/kv/put", fmt.Sprintf(`{"key":%q,"value":"eA=="}`, marker), &put); err != nil {
			return 0, err
		}
	}
	rev, err := strconv.ParseInt(put.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("etcd revision %q: %v", put.Header.Revision, err)
	}
	var ignored map[string]any
	return rev, post("/v3/kv/compaction", fmt.Sprintf(`{"revision":"%d","physical":true}`, rev), &ignored)
}

func (cp *controlPlane) waitAPIServerReady() error {
	client, err := adminHTTPClient(cp)
	if err != nil {
		return err
	}
	return waitFor(90*time.Second, 250*time.Millisecond, "kube-apiserver /readyz", func() (bool, error) {
		if cp.apiserver.exited() {
			return false, fmt.Errorf("kube-apiserver exited: %s", cp.apiserver.tail(30))
		}
		r, err := client.Get(cp.server + "/readyz")
		if err != nil {
			return false, err
		}
		body := new(bytes.Buffer)
		_, _ = body.ReadFrom(r.Body)
		r.Body.Close()
		if r.StatusCode != 200 {
			return false, fmt.Errorf("readyz %d: %s", r.StatusCode, lastLines(body.String(), 5))
		}
		return true, nil
	})
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

func (cp *controlPlane) stop() {
	if cp == nil {
		return
	}
	cp.controllers.stop(10 * time.Second)
	cp.apiserver.stop(10 * time.Second)
	cp.etcd.stop(10 * time.Second)
}

// ---- helpers shared by the suite -----------------------------------------------------------

func adminHTTPClient(cp *controlPlane) (*http.Client, error) {
	return tlsClient(cp.ca.certPEM, cp.admin)
}

// runTool runs a short-lived command (helm) with a deadline and returns its combined output.
func runTool(timeout time.Duration, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return string(out), fmt.Errorf("%s timed out after %s", strings.Join(args[:2], " "), timeout)
	}
	if err != nil {
		return string(out), fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
