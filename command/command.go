// Package command is the gpulayer command line: one file per verb, each a
// hashicorp/cli Command with Help, Synopsis and Run. Commands talk to an
// agent through nomadish/api only.
package command

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/cli"
)

// Run runs the gpulayer command line with args (without the program name)
// and returns the process exit code: 0 on success, 1 on errors and usage
// errors, 2 when `job run` could not place every allocation.
func Run(args []string) int {
	ui := &cli.BasicUi{Reader: os.Stdin, Writer: os.Stdout, ErrorWriter: os.Stderr}
	return run(args, &Meta{UI: ui, Stdout: os.Stdout})
}

// run builds the CLI around m and runs it.
func run(args []string, m *Meta) int {
	m.init()
	// hashicorp/cli renders a command's help from a template, which writes
	// each piece (a name, its padding, a synopsis) as a separate Write.
	// Collect the whole text and hand it to the UI once it is complete:
	// a Ui.Error per Write would end every piece with a newline.
	var help bytes.Buffer
	c := &cli.CLI{
		Name:         "gpulayer",
		Version:      versionString(),
		Args:         args,
		Commands:     commands(m),
		HelpWriter:   &help,
		ErrorWriter:  &help,
		Autocomplete: false,
	}
	code, err := c.Run()
	if text := strings.TrimRight(help.String(), "\n"); text != "" {
		m.UI.Error(text)
	}
	if err != nil {
		m.UI.Error(fmt.Sprintf("Error executing CLI: %v", err))
		return 1
	}
	// hashicorp/cli answers a blank or unknown command with the usage and
	// 127 (the shell's "command not found"); like Nomad's CLI, a usage
	// error here is 1.
	if code == cliCommandNotFound {
		return 1
	}
	return code
}

// cliCommandNotFound is hashicorp/cli's exit code for a blank or unknown
// command.
const cliCommandNotFound = 127

// commands lists every command by its words.
func commands(m *Meta) map[string]cli.CommandFactory {
	cmds := map[string]cli.CommandFactory{
		"agent":      func() (cli.Command, error) { return &AgentCommand{Ui: m.UI}, nil },
		"job":        func() (cli.Command, error) { return &JobCommand{Meta: m}, nil },
		"job plan":   func() (cli.Command, error) { return &JobPlanCommand{Meta: m}, nil },
		"job queue":  func() (cli.Command, error) { return &JobQueueCommand{Meta: m}, nil },
		"job run":    func() (cli.Command, error) { return &JobRunCommand{Meta: m}, nil },
		"job status": func() (cli.Command, error) { return &JobStatusCommand{Meta: m}, nil },
		"job stop":   func() (cli.Command, error) { return &JobStopCommand{Meta: m}, nil },
		// Job versions and deployments.
		"job history":        func() (cli.Command, error) { return &JobHistoryCommand{Meta: m}, nil },
		"job revert":         func() (cli.Command, error) { return &JobRevertCommand{Meta: m}, nil },
		"deployment":         func() (cli.Command, error) { return &DeploymentCommand{Meta: m}, nil },
		"deployment list":    func() (cli.Command, error) { return &DeploymentListCommand{Meta: m}, nil },
		"deployment status":  func() (cli.Command, error) { return &DeploymentStatusCommand{Meta: m}, nil },
		"deployment promote": func() (cli.Command, error) { return &DeploymentPromoteCommand{Meta: m}, nil },
		"deployment fail":    func() (cli.Command, error) { return &DeploymentFailCommand{Meta: m}, nil },
		// Periodic and parameterized jobs.
		"job dispatch":       func() (cli.Command, error) { return &JobDispatchCommand{Meta: m}, nil },
		"job periodic":       func() (cli.Command, error) { return &JobPeriodicCommand{Meta: m}, nil },
		"job periodic force": func() (cli.Command, error) { return &JobPeriodicForceCommand{Meta: m}, nil },
		"alloc":              func() (cli.Command, error) { return &AllocCommand{Meta: m}, nil },
		"alloc status":       func() (cli.Command, error) { return &AllocStatusCommand{Meta: m}, nil },
		"alloc logs":         func() (cli.Command, error) { return &AllocLogsCommand{Meta: m}, nil },
		"alloc outputs":      func() (cli.Command, error) { return &AllocOutputsCommand{Meta: m}, nil },
		"alloc stop":         func() (cli.Command, error) { return &AllocStopCommand{Meta: m}, nil },
		"alloc signal":       func() (cli.Command, error) { return &AllocSignalCommand{Meta: m}, nil },
		"alloc restart":      func() (cli.Command, error) { return &AllocRestartCommand{Meta: m}, nil },
		"alloc exec":         func() (cli.Command, error) { return &AllocExecCommand{Meta: m}, nil },
		"node drain":         func() (cli.Command, error) { return &NodeDrainCommand{Meta: m}, nil },
		"node eligibility":   func() (cli.Command, error) { return &NodeEligibilityCommand{Meta: m}, nil },
		"node":               func() (cli.Command, error) { return &NodeCommand{Meta: m}, nil },
		"node status":        func() (cli.Command, error) { return &NodeStatusCommand{Meta: m}, nil },
		"event":              func() (cli.Command, error) { return &EventCommand{Meta: m}, nil },
		"event stream":       func() (cli.Command, error) { return &EventStreamCommand{Meta: m}, nil },
		"status":             func() (cli.Command, error) { return &StatusCommand{Meta: m}, nil },
		"system":             func() (cli.Command, error) { return &SystemCommand{Meta: m}, nil },
		"system gc":          func() (cli.Command, error) { return &SystemGCCommand{Meta: m}, nil },
		"version":            func() (cli.Command, error) { return &VersionCommand{Meta: m}, nil },
		// Artifacts (artifact.go).
		"artifact":         func() (cli.Command, error) { return &ArtifactCommand{Meta: m}, nil },
		"artifact put":     func() (cli.Command, error) { return &ArtifactPutCommand{Meta: m}, nil },
		"artifact get":     func() (cli.Command, error) { return &ArtifactGetCommand{Meta: m}, nil },
		"artifact ls":      func() (cli.Command, error) { return &ArtifactListCommand{Meta: m}, nil },
		"artifact inspect": func() (cli.Command, error) { return &ArtifactInspectCommand{Meta: m}, nil },
		// HA cluster operations.
		"server":                    func() (cli.Command, error) { return &ServerCommand{Meta: m}, nil },
		"server members":            func() (cli.Command, error) { return &ServerMembersCommand{Meta: m}, nil },
		"server join":               func() (cli.Command, error) { return &ServerJoinCommand{Meta: m}, nil },
		"operator":                  func() (cli.Command, error) { return &OperatorCommand{Meta: m}, nil },
		"operator raft":             func() (cli.Command, error) { return &OperatorRaftCommand{Meta: m}, nil },
		"operator raft list-peers":  func() (cli.Command, error) { return &OperatorRaftListPeersCommand{Meta: m}, nil },
		"operator raft remove-peer": func() (cli.Command, error) { return &OperatorRaftRemovePeerCommand{Meta: m}, nil },
		"operator snapshot":         func() (cli.Command, error) { return &OperatorSnapshotCommand{Meta: m}, nil },
		"operator snapshot save":    func() (cli.Command, error) { return &OperatorSnapshotSaveCommand{Meta: m}, nil },
		"operator snapshot restore": func() (cli.Command, error) { return &OperatorSnapshotRestoreCommand{Meta: m}, nil },
		"operator gossip":           func() (cli.Command, error) { return &OperatorGossipCommand{Meta: m}, nil },
		"operator gossip keygen":    func() (cli.Command, error) { return &OperatorGossipKeygenCommand{Meta: m}, nil },
		// Nomad's name of keygen.
		"operator gossip keyring":          func() (cli.Command, error) { return &OperatorGossipKeyringCommand{Meta: m}, nil },
		"operator gossip keyring generate": func() (cli.Command, error) { return &OperatorGossipKeygenCommand{Meta: m}, nil },
		"tls":                              func() (cli.Command, error) { return &TLSCommand{Meta: m}, nil },
		"tls ca":                           func() (cli.Command, error) { return &TLSCACommand{Meta: m}, nil },
		"tls ca create":                    func() (cli.Command, error) { return &TLSCACreateCommand{Meta: m}, nil },
		"tls cert":                         func() (cli.Command, error) { return &TLSCertCommand{Meta: m}, nil },
		"tls cert create":                  func() (cli.Command, error) { return &TLSCertCreateCommand{Meta: m}, nil },
		// ACLs and node identity.
		"acl":                func() (cli.Command, error) { return &ACLCommand{Meta: m}, nil },
		"acl bootstrap":      func() (cli.Command, error) { return &ACLBootstrapCommand{Meta: m}, nil },
		"acl policy":         func() (cli.Command, error) { return &ACLPolicyCommand{Meta: m}, nil },
		"acl policy apply":   func() (cli.Command, error) { return &ACLPolicyApplyCommand{Meta: m}, nil },
		"acl policy list":    func() (cli.Command, error) { return &ACLPolicyListCommand{Meta: m}, nil },
		"acl policy info":    func() (cli.Command, error) { return &ACLPolicyInfoCommand{Meta: m}, nil },
		"acl policy delete":  func() (cli.Command, error) { return &ACLPolicyDeleteCommand{Meta: m}, nil },
		"acl token":          func() (cli.Command, error) { return &ACLTokenCommand{Meta: m}, nil },
		"acl token create":   func() (cli.Command, error) { return &ACLTokenCreateCommand{Meta: m}, nil },
		"acl token list":     func() (cli.Command, error) { return &ACLTokenListCommand{Meta: m}, nil },
		"acl token info":     func() (cli.Command, error) { return &ACLTokenInfoCommand{Meta: m}, nil },
		"acl token self":     func() (cli.Command, error) { return &ACLTokenSelfCommand{Meta: m}, nil },
		"acl token delete":   func() (cli.Command, error) { return &ACLTokenDeleteCommand{Meta: m}, nil },
		"node secret rotate": func() (cli.Command, error) { return &NodeSecretRotateCommand{Meta: m}, nil },
		// Services (service.go).
		"service":      func() (cli.Command, error) { return &ServiceCommand{Meta: m}, nil },
		"service list": func() (cli.Command, error) { return &ServiceListCommand{Meta: m}, nil },
		"service info": func() (cli.Command, error) { return &ServiceInfoCommand{Meta: m}, nil },
		// Endpoint aliases and the fleet view (endpoint.go).
		"endpoint":         func() (cli.Command, error) { return &EndpointCommand{Meta: m}, nil },
		"endpoint status":  func() (cli.Command, error) { return &EndpointStatusCommand{Meta: m}, nil },
		"endpoint promote": func() (cli.Command, error) { return &EndpointPromoteCommand{Meta: m}, nil },
		"endpoint demote":  func() (cli.Command, error) { return &EndpointDemoteCommand{Meta: m}, nil },
		// Node pools (node_pool.go); "node pool status" is the provisioner's.
		"node pool":        func() (cli.Command, error) { return &NodePoolCommand{Meta: m}, nil },
		"node pool apply":  func() (cli.Command, error) { return &NodePoolApplyCommand{Meta: m}, nil },
		"node pool list":   func() (cli.Command, error) { return &NodePoolListCommand{Meta: m}, nil },
		"node pool info":   func() (cli.Command, error) { return &NodePoolInfoCommand{Meta: m}, nil },
		"node pool delete": func() (cli.Command, error) { return &NodePoolDeleteCommand{Meta: m}, nil },
		"node pool nodes":  func() (cli.Command, error) { return &NodePoolNodesCommand{Meta: m}, nil },
		"node pool jobs":   func() (cli.Command, error) { return &NodePoolJobsCommand{Meta: m}, nil },
		// Job validation (issue 14, job_validate.go).
		"job validate": func() (cli.Command, error) { return &JobValidateCommand{Meta: m}, nil },
		// Provisioning (node_pool_status.go).
		"node pool status": func() (cli.Command, error) { return &NodePoolStatusCommand{Meta: m}, nil },
	}
	return cmds
}

// Meta is what every command shares: where output goes, the clock and the
// common flags.
type Meta struct {
	// UI prints lines of output and errors.
	UI cli.Ui
	// Stdout receives raw bytes (log streams); nil means os.Stdout.
	Stdout io.Writer
	// Now is the clock for monitor timestamps; nil means time.Now.
	Now func() time.Time
	// Location renders times; nil means time.Local.
	Location *time.Location
	// PollInterval is the pause between evaluation polls when the server
	// answers without blocking; zero means 500 milliseconds.
	PollInterval time.Duration

	// address, token and jsonOutput are set by the common flags.
	address    string
	token      string
	jsonOutput bool
	// tls holds the common TLS flags (tls_flags.go).
	tls tlsFlags
	// verbose is set by -verbose where a command has it.
	verbose bool
	// namespace is set by -namespace where a command has it
	// (namespaceFlag); the client sends it as ?namespace=.
	namespace string
}

func (m *Meta) init() {
	if m.Stdout == nil {
		m.Stdout = os.Stdout
	}
	if m.Now == nil {
		m.Now = time.Now
	}
	if m.Location == nil {
		m.Location = time.Local
	}
	if m.PollInterval == 0 {
		m.PollInterval = 500 * time.Millisecond
	}
}

// errWriter writes to the UI's error output; flag sets print their errors
// there, one line per Write.
func (m *Meta) errWriter() io.Writer { return uiErrorWriter{m.UI} }

// uiErrorWriter sends writes to Ui.Error, one call per write without the
// trailing newline Ui.Error adds.
type uiErrorWriter struct{ ui cli.Ui }

func (w uiErrorWriter) Write(p []byte) (int, error) {
	s := string(p)
	if len(s) > 0 && s[len(s)-1] == '\n' {
		s = s[:len(s)-1]
	}
	w.ui.Error(s)
	return len(p), nil
}
