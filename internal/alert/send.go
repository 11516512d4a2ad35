package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// message is the JSON body of one alert.
type message struct {
	Text        string `json:"text"`
	Kind        string `json:"kind"`
	Source      string `json:"source"`
	Destination string `json:"destination"`
	Count       int64  `json:"count"`
	At          string `json:"at"` // RFC 3339
}

// send POSTs msg to u, bounded by a.timeout. Any 2xx answer is success.
// The error never contains u.
func (a *Alerter) send(ctx context.Context, u string, msg *message) error {
	body, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return errors.New("cannot build the request")
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error quotes the URL
		}
		return err
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // so the connection can be reused
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("answered %d: %s", resp.StatusCode, oneLine(string(head), 200))
	}
	return nil
}

// Texts. Each is one line; slackEscape is applied last.

func deadText(k key, n int64) string {
	return slackEscape(fmt.Sprintf("hookline: %s of %s → %s went to the dead set (reason failed)",
		plural(n, "event"), k.source, k.destination))
}

func circuitText(k key, streak int, lastErr string) string {
	s := fmt.Sprintf("hookline: the circuit of %s → %s opened", k.source, k.destination)
	if streak > 0 {
		s += " after " + plural(int64(streak), "failure") + " in a row"
	}
	if lastErr = oneLine(lastErr, 200); lastErr != "" {
		s += " (last error: " + lastErr + ")"
	}
	return slackEscape(s)
}

func lagText(k key, n int64, threshold, oldest time.Duration, paused bool) string {
	s := fmt.Sprintf("hookline: %s of %s → %s queued for over %s (oldest: %s)",
		plural(n, "event"), k.source, k.destination, shortDuration(threshold), shortDuration(oldest))
	if paused {
		s += "; the destination is paused"
	}
	return slackEscape(s)
}

func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// shortDuration is d to the second, without zero trailing units: 5m, 1h,
// 7m12s.
func shortDuration(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// oneLine collapses s's whitespace, newlines included, to single spaces and
// cuts it to max runes.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		s = string(r[:max]) + "…"
	}
	return s
}

// slackEscape escapes the characters Slack reads as markup.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace
