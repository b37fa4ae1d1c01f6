package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// maxListedModels bounds the entries of a models listing looked at.
const maxListedModels = 4096

// newVerifyClient is the HTTP client of live verification: no redirects,
// short timeouts, at most one idle connection per member.
func newVerifyClient(cfg Config) *http.Client {
	d := &net.Dialer{Timeout: cfg.DialTimeout}
	return &http.Client{
		Transport: &http.Transport{
			DialContext:            d.DialContext,
			MaxIdleConnsPerHost:    1,
			IdleConnTimeout:        max(3*cfg.VerifyInterval, 30*time.Second),
			ResponseHeaderTimeout:  cfg.VerifyTimeout,
			DisableCompression:     true,
			MaxResponseHeaderBytes: 64 << 10,
		},
		Timeout: cfg.VerifyTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// checkModels GETs the models listing of the member at addr and returns
// nil when it lists the endpoint's model, else an error that is the
// member's admission reason.
func (r *Router) checkModels(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.VerifyTimeout)
	defer cancel()
	path := r.ep.ModelsPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.verifier.Do(req)
	if err != nil {
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) {
			err = ue.Unwrap() // drop the url.Error's repeated method and URL
		}
		return fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d", path, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxModelsBodyBytes+1))
	if err != nil {
		return fmt.Errorf("GET %s: reading the listing: %w", path, err)
	}
	if len(body) > MaxModelsBodyBytes {
		return fmt.Errorf("GET %s: listing larger than %d bytes", path, MaxModelsBodyBytes)
	}
	if err := listsModel(body, r.ep.Model); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}

// modelsListing is the OpenAI models listing:
// {"object":"list","data":[{"id":"<model>","object":"model",...}]}.
type modelsListing struct {
	Object string `json:"object"`
	Data   []struct {
		ID string `json:"id"`
	} `json:"data"`
}

// listsModel returns nil when body, an OpenAI models listing, lists model
// among its first maxListedModels entries.
func listsModel(body []byte, model string) error {
	var l modelsListing
	if err := json.Unmarshal(body, &l); err != nil {
		return fmt.Errorf("not an OpenAI models listing: %w", err)
	}
	if l.Object != "" && l.Object != "list" {
		return fmt.Errorf("not an OpenAI models listing: object is %q, not \"list\"", l.Object)
	}
	for i, d := range l.Data {
		if i == maxListedModels {
			break
		}
		if d.ID == model {
			return nil
		}
	}
	return fmt.Errorf("model %q not listed (%d models listed)", model, len(l.Data))
}
