package command

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hashicorp/cli"
	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/agent"
)

// AgentCommand runs a gpulayer agent: server, client or both (-dev).
type AgentCommand struct {
	Ui cli.Ui
	// ShutdownCh, when set, stops the agent when it is closed or sent to
	// (tests use it instead of signals).
	ShutdownCh <-chan struct{}
	// tokenOnCommandLine is set by readConfig when -acl-token carried a
	// literal secret outside -dev; Run then logs a warning.
	tokenOnCommandLine bool
}

// Help implements cli.Command.
func (c *AgentCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer agent [options]

  Starts a gpulayer agent and runs until interrupted. With -dev it runs a
  server and a client in one process bound to 127.0.0.1, keeps its state under
  the data dir (so a restart loses nothing) and, when the host has no GPU,
  adds two simulated NVIDIA GPUs so GPU jobs can run anywhere.

Options:

  -dev                 Server and client in one process, loopback only.
  -server              Enable the server role.
  -client              Enable the client role.
  -config=FILE         Agent configuration file in HCL.
  -data-dir=DIR        State directory (default $GPULAYER_HOME or ~/.gpulayer).
  -bind=ADDR           Address to bind (default 0.0.0.0; 127.0.0.1 with -dev).
                       Servers need an address other hosts can reach.
  -http-bind=ADDR      Address of the HTTP API only (default: -bind), e.g.
                       0.0.0.0 to serve every interface.
  -http-port=PORT      HTTP API port (default 4656).
  -raft-port=PORT      Raft port (default 4657).
  -serf-port=PORT      Server gossip (memberlist) port (default 4658).
  -node=NAME           Node and server name (default: the hostname).
  -dc=NAME             Datacenter of the client node (default dc1).
  -node-class=NAME     Class of the client node.
  -node-pool=NAME      Node pool of the client node (default "default"; a
                       pool that does not exist is created).
  -bootstrap-expect=N  Servers to wait for before bootstrapping (default 1).
  -retry-join=ADDR     Gossip address (host or host:port) of another server
                       to join; repeat it or separate addresses by commas.
  -encrypt=KEY         Gossip encryption key (gpulayer operator gossip keygen).
  -servers=ADDRS       Comma-separated HTTP addresses of the servers a client
                       without a local server talks to (host:4656,...).
  -dev-gpus=N          Simulated GPUs when no real GPU is found in dev mode
                       (default 2; 0 turns them off). Outside dev mode a
                       client adds N simulated GPUs only when this is set.
  -log-level=LEVEL     TRACE, DEBUG, INFO, WARN or ERROR (default INFO).
  -acl-enabled=BOOL    Check ACL tokens on every route (default true; false
                       with -dev). Off outside -dev logs a warning.
  -acl-token=@FILE     Token a client-only agent registers its node with
                       (needs node write), read from FILE; else
                       $GPULAYER_ACL_TOKEN, else acl { token } in -config.
                       A literal -acl-token=SECRET works but every local
                       process can read it (ps): the agent warns.
`)
}

// Synopsis implements cli.Command.
func (c *AgentCommand) Synopsis() string {
	return "Runs a gpulayer agent (server, client, or both with -dev)"
}

// Run implements cli.Command.
func (c *AgentCommand) Run(args []string) int {
	cfg, err := c.readConfig(args)
	if err != nil {
		c.Ui.Error(err.Error())
		return 1
	}
	level := hclog.LevelFromString(cfg.LogLevel)
	logger := hclog.New(&hclog.LoggerOptions{
		Name:   "agent",
		Level:  level,
		Output: os.Stderr,
	})
	if c.tokenOnCommandLine {
		logger.Warn(tokenOnCommandLineWarning)
	}
	// Read once: no child (the native shim, a task) inherits it.
	_ = os.Unsetenv(aclTokenEnv)
	startMemProfiler(logger)
	startCPUProfiler(logger)
	a, err := agent.New(cfg, logger)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error starting agent: %v", err))
		return 1
	}
	scheme := "http"
	if cfg.TLS != nil && cfg.TLS.HTTP {
		scheme = "https"
	}
	c.Ui.Output(fmt.Sprintf("==> GPUlayer agent started! HTTP API on %s://%s (data dir %s)", scheme, a.HTTPAddr(), cfg.DataDir))
	if cfg.DevMode {
		try := "gpulayer job run examples/hello-gpu.hcl"
		if addr := "http://" + a.HTTPAddr(); addr != "http://127.0.0.1:4656" {
			try = "gpulayer job run -address=" + addr + " examples/hello-gpu.hcl"
		}
		c.Ui.Output("==> Dev mode: server and client in one process. Try: " + try)
	}

	sigCh := make(chan os.Signal, 4)
	signal.Notify(sigCh, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigCh)
	select {
	case sig := <-sigCh:
		c.Ui.Output(fmt.Sprintf("==> Caught signal %v, shutting down", sig))
	case <-c.ShutdownCh:
		c.Ui.Output("==> Shutting down")
	case err := <-a.FatalCh():
		c.Ui.Error(fmt.Sprintf("==> Stopping: %v", err))
		if serr := a.Shutdown(); serr != nil {
			c.Ui.Error(fmt.Sprintf("Error during shutdown: %v", serr))
		}
		return 1
	}
	if err := a.Shutdown(); err != nil {
		c.Ui.Error(fmt.Sprintf("Error during shutdown: %v", err))
		return 1
	}
	return 0
}

func (c *AgentCommand) readConfig(args []string) (*agent.Config, error) {
	flags := flag.NewFlagSet("agent", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	var (
		dev, srv, cl                 bool
		configFile, dataDir, bind    string
		nodeName, dc, nodeClass, lvl string
		nodePool                     string
		httpPort, raftPort, expect   int
		serfPort                     int
		httpBind                     string
		encrypt                      string
		retryJoin, servers           listFlag
		devGPUs                      = -1
		aclEnabled                   bool
		aclToken                     string
	)
	flags.BoolVar(&aclEnabled, "acl-enabled", false, "")
	flags.StringVar(&aclToken, "acl-token", "", "")
	flags.BoolVar(&dev, "dev", false, "")
	flags.BoolVar(&srv, "server", false, "")
	flags.BoolVar(&cl, "client", false, "")
	flags.StringVar(&configFile, "config", "", "")
	flags.StringVar(&dataDir, "data-dir", "", "")
	flags.StringVar(&bind, "bind", "", "")
	flags.StringVar(&nodeName, "node", "", "")
	flags.StringVar(&dc, "dc", "", "")
	flags.StringVar(&nodeClass, "node-class", "", "")
	flags.StringVar(&nodePool, "node-pool", "", "")
	flags.StringVar(&lvl, "log-level", "", "")
	flags.IntVar(&httpPort, "http-port", 0, "")
	flags.IntVar(&raftPort, "raft-port", 0, "")
	flags.IntVar(&expect, "bootstrap-expect", 0, "")
	flags.IntVar(&serfPort, "serf-port", 0, "")
	flags.StringVar(&httpBind, "http-bind", "", "")
	flags.StringVar(&encrypt, "encrypt", "", "")
	flags.Var(&retryJoin, "retry-join", "")
	flags.Var(&servers, "servers", "")
	flags.IntVar(&devGPUs, "dev-gpus", -1, "")
	if err := flags.Parse(args); err != nil {
		return nil, fmt.Errorf("%v\n\n%s", err, c.Help())
	}
	if flags.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s\n\n%s", strings.Join(flags.Args(), " "), c.Help())
	}

	cfg := agent.DefaultConfig()
	if dev {
		cfg = agent.DevConfig()
	}
	if configFile != "" {
		fileCfg, err := agent.LoadConfigFile(configFile)
		if err != nil {
			return nil, err
		}
		cfg.Merge(fileCfg)
	}
	flagCfg := &agent.Config{
		DataDir: dataDir, BindAddr: bind, Name: nodeName, Datacenter: dc, LogLevel: lvl,
		Addresses: &agent.Addresses{HTTP: httpBind},
		Ports:     &agent.Ports{HTTP: httpPort, Raft: raftPort, Serf: serfPort},
		Server:    &agent.ServerConfig{Enabled: srv, BootstrapExpect: expect, RetryJoin: retryJoin, Encrypt: encrypt},
		Client:    &agent.ClientConfig{Enabled: cl, NodeClass: nodeClass, NodePool: nodePool, Servers: servers},
	}
	if devGPUs != -1 {
		v := devGPUs
		flagCfg.Client.DevGPUs = &v
	}
	token, literal, err := resolveACLToken(aclToken)
	if err != nil {
		return nil, err
	}
	c.tokenOnCommandLine = literal && !cfg.DevMode
	flagCfg.ACL = &agent.ACLConfig{Token: token}
	flags.Visit(func(f *flag.Flag) {
		if f.Name == "acl-enabled" {
			flagCfg.ACL.Enabled = &aclEnabled
		}
	})
	cfg.Merge(flagCfg)
	return cfg, cfg.Validate()
}

// listFlag is a flag that may be repeated, each value a comma-separated
// list; empty elements are dropped.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		if p := strings.TrimSpace(part); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}
