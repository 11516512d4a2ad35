package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookline/hookline/jobs"
	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/stripe"
)

// event is one pre-signed Stripe delivery.
type event struct {
	id  string
	req []byte // the whole HTTP/1.1 request: head and body
}

// generator hands out pre-signed events, signing more on the fly when the
// pre-signed ones run out.
type generator struct {
	signer providers.Signer
	host   string // host:port, for the Host header
	path   string
	prefix string
	pre    []event
	next   atomic.Int64
	inline atomic.Int64
	at     time.Time
	keys   int // distinct data.object.id values (objectKey); 0: one per event
}

// newGenerator pre-signs n events for run. With keys > 0, event i's
// data.object.id is objectKey(i, keys) (the ordering scenarios' key);
// otherwise each event has an object of its own.
func newGenerator(secret, run, target string, n, keys int) (*generator, error) {
	p, err := stripe.New(providers.Config{Secrets: []string{secret}})
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	g := &generator{signer: p, host: u.Host, path: u.Path, prefix: "evt_" + run + "_", at: time.Now(), keys: keys}
	g.pre = make([]event, n)
	for i := range g.pre {
		g.pre[i] = g.make(i)
	}
	return g, nil
}

// eventID is event i's id: "evt_", the run's name and i.
func (g *generator) eventID(i int) string { return fmt.Sprintf("%s%09d", g.prefix, i) }

// body is event i's id and body, unsigned (the textbook run writes them
// straight into its table).
func (g *generator) body(i int) (string, []byte) {
	id := g.eventID(i)
	object := "pi_3Q" + id[4:]
	if g.keys > 0 {
		object = objectKey(i, g.keys)
	}
	// created grows with i, so that with ordering.by an event is stale
	// only when it was accepted after a later one of its key.
	return id, stripeEvent(id, object, g.at.Unix()+int64(i))
}

func (g *generator) make(i int) event {
	id, body := g.body(i)
	req := &providers.Request{Body: body, Header: http.Header{}}
	_ = g.signer.Sign(req, g.at)
	raw := fmt.Appendf(make([]byte, 0, len(body)+256),
		"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nStripe-Signature: %s\r\nContent-Length: %d\r\nUser-Agent: hookline-bench\r\n\r\n",
		g.path, g.host, req.Header.Get(stripe.Header), len(body))
	return event{id: id, req: append(raw, body...)}
}

// take returns the next new event, or false after max (when max > 0).
func (g *generator) take(max int) (event, bool) {
	i := int(g.next.Add(1) - 1)
	if max > 0 && i >= max {
		return event{}, false
	}
	if i < len(g.pre) {
		return g.pre[i], true
	}
	g.inline.Add(1)
	return g.make(i), true
}

// objectKey is the data.object.id of event i when the events share keys
// objects: round robin, so that every key has events (given at least keys
// events) and those of one key are spread over the run; keys = 1 is one
// hot key.
func objectKey(i, keys int) string {
	return fmt.Sprintf("pi_3Qkey%07d", i%keys)
}

// stripeEvent is a payment_intent.succeeded event of about 1.5 KB, shaped
// like Stripe's, about the payment intent object.
func stripeEvent(id, object string, created int64) []byte {
	return fmt.Appendf(nil, `{
  "id": %q,
  "object": "event",
  "api_version": "2024-06-20",
  "created": %d,
  "data": {
    "object": {
      "id": %q,
      "object": "payment_intent",
      "amount": 2000,
      "amount_capturable": 0,
      "amount_received": 2000,
      "application": null,
      "capture_method": "automatic",
      "client_secret": "%s_secret_Zy7bQk0l5b9hJ3nR2wT8",
      "confirmation_method": "automatic",
      "created": %d,
      "currency": "usd",
      "customer": "cus_QxR8bench0000",
      "description": "Order 8841 - hookline benchmark",
      "latest_charge": "ch_3Q%s",
      "livemode": false,
      "metadata": {"order_id": "8841", "cart": "c_7f3a91", "channel": "web"},
      "payment_method": "pm_1QbenchVisa4242",
      "payment_method_types": ["card"],
      "receipt_email": "customer@example.com",
      "shipping": {
        "address": {"city": "San Francisco", "country": "US", "line1": "510 Townsend St", "line2": null, "postal_code": "94103", "state": "CA"},
        "name": "Jenny Rosen",
        "phone": "+15555550100"
      },
      "statement_descriptor": "HOOKLINE",
      "status": "succeeded"
    },
    "previous_attributes": null
  },
  "livemode": false,
  "pending_webhooks": 1,
  "request": {"id": "req_bench0001", "idempotency_key": "b0e2d6c4-3f4e-4a8e-9a1d-7c2f1e8b9a60"},
  "type": "payment_intent.succeeded"
}`, id, created, object, object, created, id[4:])
}

type loadConfig struct {
	concurrency int
	duration    time.Duration
	dupRatio    float64
	maxEvents   int
	// rate, when positive, paces the senders together to at most this
	// many requests a second: each sends its k-th request no earlier than
	// k × concurrency / rate after the start (catching up at once when
	// answers came late), so the offered load no longer follows the
	// answers (0: closed loop, each request as soon as the last answer).
	rate  float64
	gen   *generator
	spans bool // record when each accepted event was sent and answered
	// progress, when set, counts the "accepted" answers as they arrive
	// (the colocated scenario samples it during the load).
	progress *atomic.Int64
}

// span is when an accepted event was sent and when its answer arrived.
type span struct{ sent, acked time.Time }

// loadResult is what the senders saw.
type loadResult struct {
	elapsed     time.Duration
	first, last time.Time
	sent        int
	accepted    map[string]int // event id → "accepted" answers
	dupSent     int
	duplicates  int // answered "duplicate"
	unexpected  int // a new event answered "duplicate"
	unavailable int // 503
	errors      int // other statuses and transport errors
	latencies   []time.Duration
	spans       map[string]span // with loadConfig.spans: accepted event id → span
}

type sender struct {
	lat         []time.Duration
	accepted    []string
	spans       []span  // with loadConfig.spans, one per accepted
	mine        []event // accepted events, candidates for re-sending
	dupSent     int
	duplicates  int
	unexpected  int
	unavailable int
	errors      int
}

func runLoad(ctx context.Context, cfg loadConfig) *loadResult {
	senders := make([]*sender, cfg.concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(cfg.duration)
	for i := range senders {
		s := &sender{lat: make([]time.Duration, 0, 4096)}
		senders[i] = s
		rng := rand.New(rand.NewPCG(uint64(i)+1, uint64(start.UnixNano())))
		wg.Go(func() {
			c := &client{addr: cfg.gen.host}
			defer c.close()
			var every time.Duration
			if cfg.rate > 0 {
				every = time.Duration(float64(cfg.concurrency) / cfg.rate * float64(time.Second))
			}
			next := start.Add(time.Duration(i) * every / time.Duration(cfg.concurrency)) // spread the senders' turns
			for ctx.Err() == nil && time.Now().Before(deadline) {
				if every > 0 {
					if wait := time.Until(next); wait > 0 {
						select {
						case <-ctx.Done():
							return
						case <-time.After(wait):
						}
					}
					next = next.Add(every)
				}
				var ev event
				dup := len(s.mine) > 0 && rng.Float64() < cfg.dupRatio
				if dup {
					ev = s.mine[rng.IntN(len(s.mine))]
					s.dupSent++
				} else {
					var ok bool
					if ev, ok = cfg.gen.take(cfg.maxEvents); !ok {
						return
					}
				}
				t0 := time.Now()
				status, body, err := c.do(ev.req)
				s.lat = append(s.lat, time.Since(t0))
				switch {
				case err != nil:
					s.errors++
				case status == http.StatusOK && bytes.Contains(body, []byte(`"status":"accepted"`)):
					if dup {
						s.unexpected++ // a re-sent, accepted event accepted again
					} else {
						s.mine = append(s.mine, ev)
					}
					s.accepted = append(s.accepted, ev.id)
					if cfg.progress != nil {
						cfg.progress.Add(1)
					}
					if cfg.spans {
						s.spans = append(s.spans, span{t0, time.Now()})
					}
				case status == http.StatusOK && bytes.Contains(body, []byte(`"status":"duplicate"`)):
					s.duplicates++
					if !dup {
						s.unexpected++
					}
				case status == http.StatusServiceUnavailable:
					s.unavailable++
				default:
					s.errors++
				}
			}
		})
	}
	wg.Wait()
	end := time.Now()
	r := &loadResult{elapsed: end.Sub(start), first: start, last: end, accepted: map[string]int{}}
	if cfg.spans {
		r.spans = map[string]span{}
	}
	for _, s := range senders {
		r.sent += len(s.lat)
		r.latencies = append(r.latencies, s.lat...)
		for i, id := range s.accepted {
			r.accepted[id]++
			if cfg.spans {
				r.spans[id] = s.spans[i]
			}
		}
		r.dupSent += s.dupSent
		r.duplicates += s.duplicates
		r.unexpected += s.unexpected
		r.unavailable += s.unavailable
		r.errors += s.errors
	}
	return r
}

// client is a minimal HTTP/1.1 client over one keep-alive connection: it
// writes a pre-built request and reads the answer. It costs a fraction of
// net/http's client, which matters when the load generator shares a small
// machine with the server it measures.
type client struct {
	addr string
	conn net.Conn
	r    *bufio.Reader
	body []byte
}

func (c *client) close() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
}

// do sends req and returns the status and body of the answer. The body is
// valid until the next call.
func (c *client) do(req []byte) (int, []byte, error) {
	if c.conn == nil {
		conn, err := net.DialTimeout("tcp", c.addr, 5*time.Second)
		if err != nil {
			return 0, nil, err
		}
		c.conn, c.r = conn, bufio.NewReaderSize(conn, 4096)
	}
	_ = c.conn.SetDeadline(time.Now().Add(30 * time.Second))
	status, body, keep, err := c.roundTrip(req)
	if err != nil || !keep {
		c.close()
	}
	return status, body, err
}

func (c *client) roundTrip(req []byte) (status int, body []byte, keep bool, err error) {
	if _, err = c.conn.Write(req); err != nil {
		return 0, nil, false, err
	}
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return 0, nil, false, err
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, nil, false, fmt.Errorf("bad status line %q", line)
	}
	if status, err = strconv.Atoi(string(line[9:12])); err != nil {
		return 0, nil, false, fmt.Errorf("bad status line %q", line)
	}
	length, chunked := -1, false
	keep = true
	for {
		h, err := c.r.ReadSlice('\n')
		if err != nil {
			return 0, nil, false, err
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		k, v, _ := bytes.Cut(h, []byte(":"))
		v = bytes.TrimSpace(v)
		switch {
		case bytes.EqualFold(k, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(v)); err != nil {
				return 0, nil, false, fmt.Errorf("bad Content-Length %q", v)
			}
		case bytes.EqualFold(k, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(v, []byte("chunked"))
		case bytes.EqualFold(k, []byte("Connection")):
			keep = !bytes.EqualFold(v, []byte("close"))
		}
	}
	c.body = c.body[:0]
	switch {
	case chunked:
		for {
			line, err := c.r.ReadSlice('\n')
			if err != nil {
				return 0, nil, false, err
			}
			n, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.SplitN(line, []byte(";"), 2)[0])), 16, 32)
			if err != nil {
				return 0, nil, false, fmt.Errorf("bad chunk size %q", line)
			}
			if n == 0 {
				_, err = c.r.ReadSlice('\n') // the final CRLF (no trailers from our server)
				return status, c.body, keep, err
			}
			if c.body, err = readN(c.r, c.body, int(n)+2); err != nil {
				return 0, nil, false, err
			}
			c.body = c.body[:len(c.body)-2]
		}
	case length >= 0:
		c.body, err = readN(c.r, c.body, length)
		return status, c.body, keep, err
	default: // until EOF
		b, err := io.ReadAll(c.r)
		return status, b, false, err
	}
}

func readN(r *bufio.Reader, dst []byte, n int) ([]byte, error) {
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	_, err := io.ReadFull(r, dst[start:])
	return dst, err
}

// destination is the loopback receiver: it answers 200 and counts each
// (Hookline-Destination, Idempotency-Key) it sees, per run. For ordered
// events (Hookline-Order-Key) it also records, per destination and key,
// the order in which the forwards began and whether two were ever in
// progress at once.
type destination struct {
	url   string
	srv   *http.Server
	mu    sync.Mutex
	sinks map[string]*sink
}

// sink is one run's share of the destination.
type sink struct {
	latency time.Duration // how long each request is held before its answer
	mu      sync.Mutex
	hits    map[string]int      // hitKey → forwards
	lines   map[string][]string // lineKey → event ids, in the order their forwards began
	busy    map[string]int      // lineKey → forwards in progress
	// overlaps counts forwards that began while another of their line
	// was in progress.
	overlaps int
	held     time.Duration // total time requests were held (latency > 0)
	heldN    int
	// distinct counts the hitKeys seen at least once (with one destination:
	// the distinct events received), readable without mu.
	distinct atomic.Int64
}

// hitKey names an event's forwards to one destination.
func hitKey(dest, idempotencyKey string) string { return dest + " " + idempotencyKey }

// lineKey names an ordering line: a destination and a key.
func lineKey(dest, orderKey string) string { return dest + " " + orderKey }

// begin records the start of a forward and returns the function that
// records its end, which must run before the answer is written: hookline
// may start the line's next forward as soon as it has the answer.
func (s *sink) begin(dest, idem, orderKey, eventID string) (end func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := hitKey(dest, idem)
	if s.hits[k]++; s.hits[k] == 1 {
		s.distinct.Add(1)
	}
	if orderKey == "" {
		return func() {}
	}
	line := lineKey(dest, orderKey)
	s.lines[line] = append(s.lines[line], eventID)
	if s.busy[line]++; s.busy[line] > 1 {
		s.overlaps++
	}
	return func() {
		s.mu.Lock()
		s.busy[line]--
		s.mu.Unlock()
	}
}

// received is what the sink saw: forwards per hitKey, event ids per line,
// and the overlaps.
type received struct {
	hits     map[string]int
	lines    map[string][]string
	overlaps int
	heldMs   float64 // mean time a request was held
}

func (s *sink) snapshot() received {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := received{hits: maps.Clone(s.hits), lines: make(map[string][]string, len(s.lines)), overlaps: s.overlaps}
	for k, v := range s.lines {
		r.lines[k] = slices.Clone(v)
	}
	if s.heldN > 0 {
		r.heldMs = ms(s.held) / float64(s.heldN)
	}
	return r
}

// otlpTracesPath is where OTLP/HTTP exporters send spans: the loopback
// destination is also the traced mode's collector.
const otlpTracesPath = "/v1/traces"

func startDestination() (*destination, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &destination{url: "http://" + l.Addr().String(), sinks: map[string]*sink{}}
	d.srv = &http.Server{Handler: d, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = d.srv.Serve(l) }()
	return d, nil
}

// newSink adds run's sink, which holds every request for latency.
func (d *destination) newSink(run string, latency time.Duration) *sink {
	s := &sink{latency: latency, hits: map[string]int{}, lines: map[string][]string{}, busy: map[string]int{}}
	d.mu.Lock()
	d.sinks[run] = s
	d.mu.Unlock()
	return s
}

func (d *destination) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if r.URL.Path == otlpTracesPath {
		// The traced mode's collector: spans are received and dropped
		// (an empty ExportTraceServiceResponse is an empty body).
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
		return
	}
	run, ok := strings.CutPrefix(r.URL.Path, "/hooks/")
	d.mu.Lock()
	s := d.sinks[run]
	d.mu.Unlock()
	if !ok || s == nil {
		http.NotFound(w, r)
		return
	}
	dest := r.Header.Get("Hookline-Destination")
	if dest == "" {
		dest = jobs.DefaultDestination
	}
	end := s.begin(dest, r.Header.Get("Idempotency-Key"), r.Header.Get("Hookline-Order-Key"), r.Header.Get("Hookline-Event-Id"))
	if s.latency > 0 {
		t0 := time.Now()
		time.Sleep(s.latency)
		held := time.Since(t0)
		s.mu.Lock()
		s.held, s.heldN = s.held+held, s.heldN+1
		s.mu.Unlock()
	}
	end()
	w.WriteHeader(http.StatusOK)
}

func (d *destination) Close() { _ = d.srv.Close() }
