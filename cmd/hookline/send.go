package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/hookline/hookline/internal/config"
	"github.com/hookline/hookline/providers"
)

func settingsFunc(m map[string]any) func(v any) error {
	return func(v any) error {
		if m == nil {
			return nil
		}
		raw, err := yaml.Marshal(m)
		if err != nil {
			return err
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		dec.KnownFields(true)
		return dec.Decode(v)
	}
}

func cmdSend(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "config file (default $HOOKLINE_CONFIG, then ./hookline.yaml)")
	source := fs.String("source", "", "source name to send to (required)")
	file := fs.String("file", "", "payload file (default: a sample event)")
	eventID := fs.String("event-id", "", "event id for the sample (default: a new one)")
	typ := fs.String("type", "", "event type for the sample")
	target := fs.String("url", "", "URL to POST to (default: http://<listen>/webhooks/<source>)")
	if err := fs.Parse(args); err != nil {
		return &exitError{2, err}
	}
	if *source == "" {
		return &exitError{2, fmt.Errorf("send: --source is required")}
	}
	cfg, err := config.Load(configPath(*cfgPath))
	if err != nil {
		return err
	}
	var src *config.Source
	for _, s := range cfg.Sources {
		if s.Name == *source {
			src = s
		}
	}
	if src == nil {
		return &exitError{2, fmt.Errorf("send: --source %q is not in the config", *source)}
	}
	signer, ok := src.Adapter().(providers.Signer)
	if !ok {
		return fmt.Errorf("send: provider %s cannot sign (its deliveries are signed with the provider's private key)", src.Provider)
	}
	if *eventID == "" {
		*eventID = fmt.Sprintf("evt_%d", time.Now().UnixNano())
	}
	if *typ == "" {
		*typ = "payment_intent.succeeded"
	}
	u := *target
	if u == "" {
		host := cfg.Listen
		if strings.HasPrefix(host, ":") {
			host = "127.0.0.1" + host
		}
		scheme := "http"
		if cfg.TLSCert != "" {
			scheme = "https"
		}
		u = scheme + "://" + host + "/webhooks/" + src.Name
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return &exitError{2, fmt.Errorf("send: --url: %w", err)}
	}
	req := &providers.Request{Header: http.Header{"Content-Type": {"application/json"}}, URL: parsed}
	if *file != "" {
		if req.Body, err = os.ReadFile(*file); err != nil {
			return err
		}
		if !json.Valid(req.Body) {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	} else {
		req.Body = sample(*eventID, *typ)
	}
	// Providers that take the event id from a header get it there.
	var d providers.Description
	if ds, ok := src.Adapter().(providers.Describer); ok {
		d = ds.Describe()
	}
	if h, ok := strings.CutPrefix(d.DefaultEventID, "header:"); ok && !strings.ContainsAny(h, ":{}") {
		req.Header.Set(h, *eventID)
	}
	if idSpec, _ := src.KeyResolvers(); idSpec != nil && strings.HasPrefix(src.EventID, "header:") {
		req.Header.Set(strings.TrimPrefix(src.EventID, "header:"), *eventID)
	}
	if err := signer.Sign(req, time.Now()); err != nil {
		return fmt.Errorf("send: sign: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, req.URL.String(), bytes.NewReader(req.Body))
	if err != nil {
		return err
	}
	hreq.Header = req.Header
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		return fmt.Errorf("send: %w (is hookline running? try `make run`)", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	fmt.Fprintf(stdout, "%s\n%s\n", resp.Status, strings.TrimSpace(string(body)))
	if resp.StatusCode/100 != 2 {
		return &exitError{1, fmt.Errorf("send: %s answered %s", req.URL, resp.Status)}
	}
	return nil
}

// sample is a Stripe-shaped event that also carries the fields other
// JSON providers read their id and type from.
func sample(id, typ string) []byte {
	now := time.Now().UTC()
	ev := map[string]any{
		"id":          id,
		"object":      "event",
		"type":        typ,
		"created":     now.Unix(),
		"event_id":    id,
		"event_type":  typ,
		"occurred_at": now.Format(time.RFC3339),
		"livemode":    false,
		"data": map[string]any{
			"id":     "pi_" + id,
			"object": map[string]any{"id": "pi_" + id, "amount": 2000, "currency": "usd", "status": "succeeded"},
		},
	}
	b, _ := json.Marshal(ev)
	return b
}
