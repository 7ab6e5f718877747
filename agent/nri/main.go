// gpupack-nri: gpupack's node-side injection as an NRI plugin (docs/security.md "Node-side
// injection", docs/install.md "Node-side injection"). It registers with the container runtime's NRI
// socket and, at each CreateContainer, sets the container's device list and memory caps from its
// pod's gpupack.io/allocation and removes every device or cap variable the container would
// otherwise have had, wherever that came from (the pod spec, envFrom, the image). The decision is
// the agent's C++ (agent/injection.h), called through cgo.
//
// It checks the socket before each attempt and says what it finds in its log and in /metrics
// (gpupack_nri_socket_present, gpupack_nri_connected); /readyz answers 200 only while registered.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
)

// status is what /metrics and /readyz report.
type status struct {
	mu            sync.Mutex
	socketChecked bool // no gpupack_nri_socket_present before the first check
	socketPresent bool
	connected     bool
	containers    map[string]int64 // by result: adjusted, unchanged, exempt, refused
	mpsNamespaces bool             // an MPS server is named: report the pending releases
	releases      int              // MPS namespaces waiting for their client to detach
}

func (s *status) setPendingReleases(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releases = n
}

func (s *status) setSocketPresent(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.socketChecked = true
	s.socketPresent = v
}

func (s *status) setConnected(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.connected = v
}

func (s *status) countContainer(result string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.containers[result]++
}

func gauge(v bool) int {
	if v {
		return 1
	}
	return 0
}

func (s *status) serveMetrics(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	if s.socketChecked {
		fmt.Fprintf(w, "# HELP gpupack_nri_socket_present 1 when the runtime's NRI socket exists at --socket.\n"+
			"# TYPE gpupack_nri_socket_present gauge\ngpupack_nri_socket_present %d\n", gauge(s.socketPresent))
	}
	fmt.Fprintf(w, "# HELP gpupack_nri_connected 1 while the plugin is registered with the runtime.\n"+
		"# TYPE gpupack_nri_connected gauge\ngpupack_nri_connected %d\n", gauge(s.connected))
	fmt.Fprintf(w, "# HELP gpupack_nri_containers_total Container creations decided, by result.\n"+
		"# TYPE gpupack_nri_containers_total counter\n")
	for _, result := range []string{"adjusted", "unchanged", "exempt", "refused"} {
		fmt.Fprintf(w, "gpupack_nri_containers_total{result=%q} %d\n", result, s.containers[result])
	}
	if s.mpsNamespaces {
		fmt.Fprintf(w, "# HELP gpupack_nri_mps_namespace_releases_pending MPS namespaces of stopped containers "+
			"not yet deleted (a client still attached).\n# TYPE gpupack_nri_mps_namespace_releases_pending gauge\n"+
			"gpupack_nri_mps_namespace_releases_pending %d\n", s.releases)
	}
}

func (s *status) serveReady(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	connected := s.connected
	s.mu.Unlock()
	if !connected {
		http.Error(w, "not registered with the runtime's NRI", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

type options struct {
	socket            string
	exempt            []string
	mps               mpsServer
	mpsDefaultPercent int
	mpsReleaseRetry   time.Duration
	name              string
	index             string
	listen            string
	retry             time.Duration
}

// socketHint is what the log says when the socket is missing: which runtimes have NRI, and how
// to turn it on where it is off by default.
const socketHint = "the runtime has NRI off or serves it elsewhere: containerd 2.x and CRI-O have it on by default; " +
	"containerd 1.7 needs disable = false under [plugins.\"io.containerd.nri.v1.nri\"] in /etc/containerd/config.toml " +
	"(docs/install.md \"Node-side injection\")"

// run registers with the runtime until ctx ends, registering again whenever the connection goes
// (a runtime restart); until it is registered, containers are created without its adjustment.
func run(ctx context.Context, o options, st *status) {
	var releases *releaser
	if o.mps.Server != "" {
		releases = newReleaser(o.mpsReleaseRetry, st)
		go releases.run(ctx)
	}
	missing := false
	for ctx.Err() == nil {
		if _, err := os.Stat(o.socket); err != nil {
			if !missing {
				log.Printf("NRI socket %s: %v: %s; checking again every %s", o.socket, err, socketHint, o.retry)
			}
			st.setSocketPresent(false) // after the log, so whoever sees the metric finds the reason logged
			missing = true
			sleep(ctx, o.retry)
			continue
		}
		missing = false
		st.setSocketPresent(true)
		p := &plugin{status: st, exemptNamespaces: o.exempt, mps: o.mps, mpsDefaultPercentage: o.mpsDefaultPercent,
			releases: releases}
		s, err := stub.New(p, stub.WithPluginName(o.name), stub.WithPluginIdx(o.index), stub.WithSocketPath(o.socket),
			stub.WithOnClose(func() { st.setConnected(false) }),
			// A request the plugin cannot answer (a timeout, a lost connection) fails the container's
			// creation instead of creating it unadjusted; a timed-out request (a slow MPS daemon)
			// keeps the plugin registered for the next.
			stub.WithFailurePolicy(&api.FailurePolicy{FailRequest: true, KeepConnected: true}))
		if err != nil {
			log.Fatalf("NRI plugin: %v", err)
		}
		err = s.Run(ctx)
		st.setConnected(false)
		if ctx.Err() != nil {
			return
		}
		log.Printf("NRI connection on %s ended (%v); registering again in %s", o.socket, err, o.retry)
		sleep(ctx, o.retry)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func main() {
	log.SetFlags(log.LstdFlags | log.LUTC)
	log.SetPrefix("gpupack-nri: ")
	var o options
	flag.StringVar(&o.socket, "socket", api.DefaultSocketPath, "the runtime's NRI socket")
	flag.StringVar(&o.name, "name", "gpupack", "the plugin's name in NRI registration")
	flag.StringVar(&o.index, "index", "90", "the plugin's two-digit NRI index: plugins run in index order, "+
		"so a late index lets gpupack's decision see (and override) what earlier plugins set")
	flag.StringVar(&o.listen, "listen", ":9466", "address of /metrics, /healthz and /readyz, printed first on "+
		"stdout once bound (port 0: a free one; empty: none)")
	flag.DurationVar(&o.retry, "retry", 5*time.Second, "wait between checks of the socket and between registrations")
	flag.Func("exempt-namespace", "a namespace whose pods keep the env they were created with "+
		"(GPU infrastructure that takes every GPU itself); repeat for each", func(ns string) error {
		o.exempt = append(o.exempt, ns)
		return nil
	})
	flag.StringVar(&o.mps.PipeDirectory, "mps-pipe-directory", "", "the node's MPS control daemon's pipe directory (its "+
		"CUDA_MPS_PIPE_DIRECTORY on the host): containers with gpupack devices get it as CUDA_MPS_PIPE_DIRECTORY, "+
		"bind-mounted at the same path, or with --mps-server their own namespace's (empty: no MPS)")
	flag.StringVar(&o.mps.Server, "mps-server", "", "the MPS v3 server (driver R615+) on which each container with "+
		"gpupack devices gets a namespace of its own, capped at its compute share (empty: no namespaces)")
	flag.StringVar(&o.mps.ControlBinary, "mps-control-binary", "nvidia-cuda-mps-control", "the MPS control CLI, "+
		"a path or a name on PATH")
	flag.IntVar(&o.mpsDefaultPercent, "mps-default-namespace-percentage", 10, "the ceiling put on the server's "+
		"default namespace, which no container is sent to, so one that reaches it anyway cannot take the GPU "+
		"(0: left alone)")
	flag.DurationVar(&o.mpsReleaseRetry, "mps-release-retry", 30*time.Second, "how often a stopped container's "+
		"namespace whose client is still attached is asked to go again")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "gpupack-nri: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if o.mps.Server != "" && o.mps.PipeDirectory == "" {
		fmt.Fprintln(os.Stderr, "gpupack-nri: --mps-server needs --mps-pipe-directory, the MPS daemon's pipe directory")
		os.Exit(2)
	}
	if o.mpsDefaultPercent < 0 || o.mpsDefaultPercent > 100 {
		fmt.Fprintf(os.Stderr, "gpupack-nri: --mps-default-namespace-percentage %d is outside 0..100\n", o.mpsDefaultPercent)
		os.Exit(2)
	}
	if o.mpsReleaseRetry <= 0 {
		fmt.Fprintln(os.Stderr, "gpupack-nri: --mps-release-retry must be positive")
		os.Exit(2)
	}

	st := &status{containers: map[string]int64{}, mpsNamespaces: o.mps.Server != ""}
	if o.listen != "" {
		listener, err := net.Listen("tcp", o.listen)
		if err != nil {
			log.Fatalf("--listen %s: %v", o.listen, err)
		}
		// The bound address first on stdout, as the C++ binaries print theirs, so a test can ask
		// for port 0 (docs/design.md "Command lines").
		fmt.Println(listener.Addr().String())
		mux := http.NewServeMux()
		mux.HandleFunc("/metrics", st.serveMetrics)
		mux.HandleFunc("/readyz", st.serveReady)
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
		go func() {
			if err := http.Serve(listener, mux); err != nil && !errors.Is(err, net.ErrClosed) {
				log.Fatalf("serving %s: %v", o.listen, err)
			}
		}()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	run(ctx, o, st)
	log.Printf("stopped")
}
