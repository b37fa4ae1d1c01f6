package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/agent"
	"github.com/gpulayer/gpulayer/structs"
)

// xss is job-provided text that every page must show as text.
const xss = `<script>alert(1)</script>`

// uiJobHCL is the job the browser test pastes into the run page: a
// service holding one GPU that prints markup, then a numbered line every
// 300 ms, so a live log view sees lines arrive.
const uiJobHCL = `job "ui-demo" {
  type = "service"
  meta {
    note = "<script>alert(1)</script>"
  }
  group "web" {
    task "main" {
      driver = "native"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo '<script>alert(2)</script>'; echo \"gpu: $CUDA_VISIBLE_DEVICES\"; i=0; while true; do echo \"tick $i\"; i=$((i+1)); sleep 0.3; done"]
      }
      resources {
        cpu    = 100
        memory = 64
        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
`

// chromiumPath finds Debian's chromium. Without it the test fails under
// CI=true and skips otherwise.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found on PATH; .ci/run installs Debian's chromium package")
	}
	t.Skip("chromium not found on PATH (apt-get install chromium); browser tests skipped")
	return ""
}

// screenshotDir is $GPULAYER_SCREENSHOT_DIR, created if needed, or a
// temporary directory.
func screenshotDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("GPULAYER_SCREENSHOT_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// startUIAgent runs an in-process dev agent (two simulated GPUs) on free
// ports and returns its base URL.
func startUIAgent(t *testing.T) string {
	t.Helper()
	cfg := agent.DevConfig()
	cfg.DataDir = taskUserDir(t)
	cfg.Ports.HTTP = freePort(t)
	cfg.Ports.Raft = freePort(t)
	cfg.LogLevel = "ERROR"
	a, err := agent.New(cfg, hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: io.Discard}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Shutdown() })
	return "http://" + a.HTTPAddr()
}

// browser starts headless Chromium at 1280x800 and records every
// JavaScript dialog: confirm() is accepted (the stop button asks), any
// other dialog (an alert from injected script) is counted as a failure.
type browser struct {
	ctx     context.Context
	mu      sync.Mutex
	alerts  []string
	shotDir string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 800),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	b := &browser{ctx: ctx, shotDir: screenshotDir(t)}
	// The first Run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			if ev.Type != page.DialogTypeConfirm {
				b.mu.Lock()
				b.alerts = append(b.alerts, string(ev.Type)+": "+ev.Message)
				b.mu.Unlock()
			}
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	return b
}

// run runs steps with a deadline, failing the test with what it was doing
// and the page's main element.
func (b *browser) run(t *testing.T, what string, timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		hctx, hcancel := context.WithTimeout(b.ctx, 5*time.Second)
		defer hcancel()
		html, _ := chromedp.Run(hctx, chromedp.OuterHTML(chromedp.CSS("main")))
		t.Fatalf("%s: %v\npage main:\n%.3000s", what, err, html)
	}
}

// text returns the text of the first element matching the CSS selector.
func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// eval evaluates a JavaScript expression.
func eval[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// shot saves a PNG of the viewport as <dir>/<name>.png.
func (b *browser) shot(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(b.shotDir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", path)
}

// waitJS polls a JavaScript boolean expression every 100 ms until it is
// true or the context ends.
func waitJS(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		for {
			ok, err := chromedp.Evaluate[bool](expr)(ctx, tg)
			if err != nil {
				return err
			}
			if ok {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s: %w", expr, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}

// putJob registers a job through the API.
func putJob(t *testing.T, base string, job *structs.Job) {
	t.Helper()
	body, _ := json.Marshal(map[string]interface{}{"Job": job})
	req, _ := http.NewRequest(http.MethodPut, base+"/v1/jobs", bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("PUT /v1/jobs: %s: %s", resp.Status, b)
	}
}

func TestUIBrowser(t *testing.T) {
	b := newBrowser(t)
	base := startUIAgent(t)
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }

	// A second job, registered through the API, whose Name (which the
	// jobspec cannot set) carries markup. It asks for more GPUs than the
	// node has, so it stays queued with a reason.
	putJob(t, base, &structs.Job{ID: "named", Name: xss, Type: "batch", Datacenters: []string{"dc1"}, Meta: map[string]string{xss: xss},
		TaskGroups: []*structs.TaskGroup{{Name: "big", Count: 1, Tasks: []*structs.Task{{Name: "main", Driver: "native",
			Config:    map[string]interface{}{"command": "/bin/true"},
			Resources: &structs.Resources{CPU: 100, MemoryMB: 64, Devices: []*structs.RequestedDevice{{Name: "nvidia/gpu", Count: 8}}}}}}}})

	// Run page: paste the job, plan it, run it.
	b.run(t, "plan on the run page", 30*time.Second,
		chromedp.Navigate(base+"/ui/run"),
		chromedp.WaitVisible(css("#hcl")),
		chromedp.SetValue(css("#hcl"), uiJobHCL),
		chromedp.Click(css("#plan-button")),
		chromedp.WaitVisible(css("#plan-output")),
		waitJS(`!document.getElementById('run-button').disabled`),
	)
	if title := b.text(t, "#plan-title"); !strings.Contains(title, "ui-demo") {
		t.Fatalf("plan title %q", title)
	}
	// With the plan endpoint the page shows the scheduler's plan, without
	// it the parsed job; either way it names the group.
	body := b.text(t, "#plan-output")
	if resp, err := http.Post(base+"/v1/job/ui-demo/plan", "application/json", strings.NewReader(`{}`)); err == nil {
		resp.Body.Close()
		hasPlan := resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed
		if hasPlan && !strings.Contains(body, "Group web: place 1") {
			t.Errorf("plan output %q lacks the placement", body)
		}
		if !hasPlan && !strings.Contains(body, "no plan endpoint") {
			t.Errorf("plan output %q does not say it shows the parsed job", body)
		}
		t.Logf("run page plan (plan endpoint %v): %.300s", hasPlan, body)
	}
	b.shot(t, "run")
	b.run(t, "run the job", 30*time.Second,
		chromedp.Click(css("#run-button")),
		waitJS(`location.pathname === '/ui/job/ui-demo'`),
		chromedp.WaitVisible(css("#job-allocs")),
	)

	// Job page: the allocation reaches running through live updates; the
	// marker set on the window shows the page was not reloaded.
	b.run(t, "allocation running on the job page", 60*time.Second,
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Evaluate[bool](`window.__sameDocument = true`)(ctx, tg)
			return err
		}),
		waitJS(`!!document.querySelector('#job-allocs [data-client-status="running"]')`),
		waitJS(`window.__sameDocument === true`),
	)
	if meta := b.text(t, "#job-head dl.facts"); !strings.Contains(meta, xss) {
		t.Errorf("job meta shown as %q, want the text %s", meta, xss)
	}
	b.shot(t, "job")

	// Allocation page: log lines appear while we watch.
	allocHref := eval[string](t, b, `document.querySelector('#job-allocs a[href^="/ui/allocation/"]').getAttribute('href')`)
	allocID := strings.TrimPrefix(allocHref, "/ui/allocation/")
	b.run(t, "open the allocation", 30*time.Second,
		chromedp.Click(css(`#job-allocs a[href^="/ui/allocation/"]`)),
		chromedp.WaitVisible(css("#log-main")),
		waitJS(`document.getElementById('log-main').textContent.includes('tick 1')`),
	)
	before := b.text(t, "#log-main")
	b.run(t, "a new log line arrives live", 30*time.Second,
		waitJS(fmt.Sprintf(`document.getElementById('log-main').textContent.length > %d`, len(before)+len("tick 10\n"))),
	)
	after := b.text(t, "#log-main")
	if !strings.Contains(after, "<script>alert(2)</script>") || !strings.Contains(after, "gpu: GPU-sim-") {
		t.Errorf("log text %q lacks the printed markup as text or the GPU line", after)
	}
	b.shot(t, "alloc")

	// Nodes page: the GPU the allocation holds, with its telemetry.
	b.run(t, "nodes page shows the held GPU", 45*time.Second,
		chromedp.Navigate(base+"/ui/nodes"),
		waitJS(fmt.Sprintf(`!!document.querySelector('tr[data-gpu] a[href="/ui/allocation/%s"]')`, allocID)),
		// The held GPU's simulated utilisation (55-95 %) arrives with
		// the next telemetry sample; the page re-reads itself for it.
		waitJS(fmt.Sprintf(`(function () {
			var a = document.querySelector('tr[data-gpu] a[href="/ui/allocation/%s"]');
			var m = a && a.closest('tr').querySelector('.meter');
			return !!m && parseFloat(m.title) >= 55;
		})()`, allocID)),
	)
	b.shot(t, "nodes")

	// Node page: the node's drivers, its GPU held by the allocation with
	// telemetry, and the allocation in its list.
	nodeHref := eval[string](t, b, `document.querySelector('article.node h2 a[href^="/ui/node/"]').getAttribute('href')`)
	b.run(t, "node page shows the held GPU", 45*time.Second,
		chromedp.Navigate(base+nodeHref),
		chromedp.WaitVisible(css("#node-drivers")),
		waitJS(fmt.Sprintf(`!!document.querySelector('#node-gpus tr[data-gpu] a[href="/ui/allocation/%s"]')`, allocID)),
		waitJS(fmt.Sprintf(`!!document.querySelector('#node-allocs tr[data-alloc="%s"]')`, allocID)),
		waitJS(`!!document.querySelector('#node-drivers tr[data-driver="native"] .status-running')`),
		waitJS(`document.getElementById('node-drain').textContent === 'not draining'`),
	)
	b.shot(t, "node")

	// A failed task's log pane opens on stderr, where its error is.
	putJob(t, base, &structs.Job{ID: "fails", Name: "fails", Type: "batch", Datacenters: []string{"dc1"},
		TaskGroups: []*structs.TaskGroup{{Name: "g", Count: 1,
			RestartPolicy:    &structs.RestartPolicy{Attempts: 0, Interval: time.Minute, Delay: time.Second, Mode: structs.RestartModeFail},
			ReschedulePolicy: &structs.ReschedulePolicy{Attempts: 0, Interval: time.Hour, Delay: 5 * time.Second, DelayFunction: "constant"},
			Tasks: []*structs.Task{{Name: "main", Driver: "native",
				Config:    map[string]interface{}{"command": "/bin/sh", "args": []interface{}{"-c", "echo all fine; echo 'boom: no model file' >&2; exit 3"}},
				Resources: &structs.Resources{CPU: 100, MemoryMB: 64}}}}}})
	b.run(t, "failed allocation's log opens on stderr", 60*time.Second,
		chromedp.Navigate(base+"/ui/job/fails"),
		waitJS(`!!document.querySelector('#job-allocs [data-client-status="failed"]')`),
		chromedp.Navigate(base+"/ui/job/fails"),
		chromedp.Click(css(`#job-allocs tr:has([data-client-status="failed"]) a[href^="/ui/allocation/"]`)),
		chromedp.WaitVisible(css("#log-main")),
		waitJS(`document.getElementById('log-main').textContent.includes('boom: no model file')`),
		waitJS(`document.querySelector('[data-action="log-type"][data-type="stderr"]').getAttribute('aria-pressed') === 'true'`),
	)
	b.shot(t, "alloc-failed")
	// The dead batch job whose only allocation failed queues nothing.
	b.run(t, "failed batch job queues nothing", 30*time.Second,
		chromedp.Navigate(base+"/ui/jobs"),
		chromedp.WaitVisible(css(`tr[data-job="fails"]`)),
	)
	if q := eval[string](t, b, `document.querySelector('tr[data-job="fails"] td:last-child').textContent.trim()`); q != "0" {
		t.Errorf("failed batch job shows queued %q, want 0", q)
	}

	// Jobs and servers pages; the named job's markup is text.
	b.run(t, "jobs page", 30*time.Second,
		chromedp.Navigate(base+"/ui/jobs"),
		chromedp.WaitVisible(css(`tr[data-job="named"]`)),
		waitJS(`document.querySelector('tr[data-job="named"] .reason') !== null`),
	)
	if txt := b.text(t, "#jobs"); !strings.Contains(txt, xss) {
		t.Errorf("jobs page text lacks the job name as text: %q", txt)
	}
	b.shot(t, "jobs")
	b.run(t, "servers page", 30*time.Second,
		chromedp.Navigate(base+"/ui/servers"),
		chromedp.WaitVisible(css("#servers")),
	)
	b.shot(t, "servers")
	b.run(t, "named job page", 30*time.Second,
		chromedp.Navigate(base+"/ui/job/named"),
		chromedp.WaitVisible(css("#job-name")),
	)
	if name := b.text(t, "#job-name"); name != xss {
		t.Errorf("job name shown as %q, want %q", name, xss)
	}
	b.shot(t, "job-queued")

	// Phone width: the jobs page still reads (tables scroll inside their
	// box rather than widening the page).
	b.run(t, "phone layout", 30*time.Second,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Navigate(base+"/ui/jobs"),
		chromedp.WaitVisible(css("#jobs")),
	)
	if w := eval[int](t, b, `document.documentElement.scrollWidth`); w > 400 {
		t.Errorf("page is %d px wide on a 390 px phone", w)
	}
	b.shot(t, "jobs-phone")
	b.run(t, "back to laptop size", 10*time.Second, chromedp.EmulateViewport(1280, 800))

	// Stop the job from its page; the allocation completes.
	b.run(t, "stop from the UI", 60*time.Second,
		chromedp.Navigate(base+"/ui/job/ui-demo"),
		chromedp.WaitVisible(css(`[data-action="stop-job"]`)),
		chromedp.Click(css(`[data-action="stop-job"]`)),
		waitJS(`document.getElementById('job-status').textContent === 'dead'`),
		waitJS(`!!document.querySelector('#job-allocs [data-client-status="complete"]')`),
	)
	b.shot(t, "job-stopped")

	// The stopped allocation released its GPU: its page shows no
	// telemetry (the GPU's figures now belong to whoever holds it).
	b.run(t, "completed allocation shows no telemetry", 30*time.Second,
		chromedp.Navigate(base+"/ui/allocation/"+allocID),
		chromedp.WaitVisible(css("#gpus-released")),
		waitJS(`!document.querySelector('#alloc-gpus .meter') && document.querySelector('#alloc-gpus td.util').textContent.trim() === 'released'`),
	)

	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.alerts) > 0 {
		t.Fatalf("injected script ran: dialogs %q", b.alerts)
	}
}
