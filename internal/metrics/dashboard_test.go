package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookline/hookline/internal/metrics"
)

// The Grafana dashboard and the page that documents the metrics, relative
// to this package.
const (
	dashboardPath  = "../../docs/grafana/hookline.json"
	operationsPath = "../../docs/operations.md"
)

// notOnDashboard lists the metrics of docs/operations.md's "Metrics" section
// that the dashboard deliberately leaves out, each with the reason. Empty:
// the dashboard shows every documented metric.
var notOnDashboard = map[string]string{}

var metricName = regexp.MustCompile(`hookline_[a-z_]+`)

type dashboard struct {
	Title         string  `json:"title"`
	UID           string  `json:"uid"`
	SchemaVersion any     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         any         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	GridPos    *gridPos    `json:"gridPos"`
	Datasource *datasource `json:"datasource"`
	Targets    []target    `json:"targets"`
	Panels     []panel     `json:"panels"` // a collapsed row's panels
}

type gridPos struct {
	X int `json:"x"`
	Y int `json:"y"`
	W int `json:"w"`
	H int `json:"h"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type target struct {
	RefID      string      `json:"refId"`
	Expr       string      `json:"expr"`
	Datasource *datasource `json:"datasource"`
}

type variable struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Query      any    `json:"query"`
	Definition string `json:"definition"`
	Multi      bool   `json:"multi"`
	IncludeAll bool   `json:"includeAll"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatalf("reading the dashboard: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var d dashboard
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", dashboardPath, err)
	}
	return d
}

// allPanels is d's panels, the panels of collapsed rows included.
func allPanels(d dashboard) []panel {
	var out []panel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

func (p panel) name() string {
	return p.Type + " panel " + p.Title + " (id " + toString(p.ID) + ")"
}

func toString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// fakeStats answers the database collector's queries with one row each, so
// that it reports every metric it has.
type fakeStats struct{}

func (fakeStats) DeadItems(context.Context) (map[[2]string]int64, error) {
	return map[[2]string]int64{{"s", "failed"}: 1}, nil
}

func (fakeStats) Queue(context.Context) (map[string]int64, float64, error) {
	return map[string]int64{"available": 1}, 2, nil
}

func (fakeStats) DestinationStates(context.Context) ([]metrics.DestinationState, error) {
	return []metrics.DestinationState{{Source: "s", Destination: "d", State: "active", Queued: 1, InFlight: 1}}, nil
}

// exposedMetrics is every hookline metric /metrics can serve, by name, with
// its type (COUNTER, GAUGE, HISTOGRAM): what metrics.For registers and what
// the database collector reports, read from a registry the way a scrape
// reads it.
func exposedMetrics(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, f := range exposedFamilies(t) {
		out[name] = f.typ
	}
	return out
}

// family is what a scrape shows of one metric: its type and its labels
// (a histogram's le aside), sorted.
type family struct {
	typ    string
	labels []string
}

// exposedFamilies is exposedMetrics with each metric's labels.
func exposedFamilies(t *testing.T) map[string]family {
	t.Helper()
	// Pedantic: Gather fails if a collector reports a metric it did not
	// describe.
	reg := prometheus.NewPedanticRegistry()
	m := metrics.For(reg)
	// A vector has no series until one is used: one sample of each.
	m.Received.WithLabelValues("s", metrics.Accepted).Inc()
	m.Idempotency.WithLabelValues("s", "claimed").Inc()
	m.Deliveries.WithLabelValues("s", "d", "success").Inc()
	m.IngestSeconds.WithLabelValues("s").Observe(0.01)
	m.BatchSize.Observe(1)
	m.WorkerBatch.WithLabelValues("claim").Observe(1)
	m.RedeliveryGap.WithLabelValues("s").Observe(1)
	m.ClaimHold.WithLabelValues("s").Observe(1)
	m.DestSeconds.WithLabelValues("s").Observe(1)
	m.SlotWait.WithLabelValues("s", "d").Observe(0)
	m.Reconciled.WithLabelValues("s").Inc()

	db := metrics.NewDatabaseCollector(fakeStats{}, slog.New(slog.DiscardHandler), 0)
	descs := make(chan *prometheus.Desc, 64)
	db.Describe(descs)
	close(descs)
	described := len(descs)
	reg.MustRegister(db)

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering hookline's metrics: %v", err)
	}
	out := map[string]family{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "hookline_") {
			continue
		}
		f := family{typ: mf.GetType().String(), labels: []string{}}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(f.labels, l.GetName()) {
					f.labels = append(f.labels, l.GetName())
				}
			}
		}
		slices.Sort(f.labels)
		out[mf.GetName()] = f
	}
	// metrics.Metrics has one collector per field; a new one must get a
	// sample above, or it would be missing here.
	if want := reflect.TypeFor[metrics.Metrics]().NumField() + described; len(out) != want {
		t.Fatalf("gathered %d hookline metrics, want %d (%d fields of metrics.Metrics, %d descriptions of the database collector): "+
			"give a new metric a sample in exposedMetrics; gathered %v", len(out), want,
			reflect.TypeFor[metrics.Metrics]().NumField(), described, slices.Sorted(maps.Keys(out)))
	}
	return out
}

// baseName is the metric a series name belongs to: name itself, or for a
// histogram's _bucket, _sum and _count series the histogram.
func baseName(name string, exposed map[string]string) string {
	if _, ok := exposed[name]; ok {
		return name
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && exposed[base] == "HISTOGRAM" {
			return base
		}
	}
	return name
}

// metricsSection is the "## Metrics" section of docs/operations.md.
func metricsSection(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(operationsPath)
	if err != nil {
		t.Fatalf("reading %s: %v", operationsPath, err)
	}
	_, after, ok := strings.Cut(string(raw), "\n## Metrics\n")
	if !ok {
		t.Fatalf(`%s has no "## Metrics" section`, operationsPath)
	}
	section, _, _ := strings.Cut(after, "\n## ")
	return section
}

func TestDashboardStructure(t *testing.T) {
	t.Parallel()
	d := loadDashboard(t)
	if d.Title == "" {
		t.Error("dashboard: no title")
	}
	if d.UID == "" {
		t.Error("dashboard: no uid (a fixed uid keeps links and re-imports stable)")
	}
	if n, ok := d.SchemaVersion.(json.Number); !ok {
		t.Errorf("dashboard: schemaVersion is %s, want a number", toString(d.SchemaVersion))
	} else if v, err := n.Int64(); err != nil || v < 36 {
		t.Errorf("dashboard: schemaVersion %s, want an integer ≥ 36 (Grafana 10 or later)", n)
	}
	if len(d.Panels) == 0 {
		t.Fatal("dashboard: no panels")
	}

	ids := map[int64]string{}
	for _, p := range allPanels(d) {
		n, ok := p.ID.(json.Number)
		id, err := n.Int64()
		if !ok || err != nil || id <= 0 {
			t.Errorf("%s: id must be a positive integer", p.name())
		} else if other, dup := ids[id]; dup {
			t.Errorf("%s: id %d already used by %s", p.name(), id, other)
		} else {
			ids[id] = p.name()
		}
		if p.Type == "row" {
			continue
		}
		switch g := p.GridPos; {
		case g == nil:
			t.Errorf("%s: no gridPos", p.name())
		case g.W < 1 || g.W > 24 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24:
			t.Errorf("%s: gridPos %+v, want 1 ≤ w ≤ 24, h > 0, x, y ≥ 0 and x+w ≤ 24", p.name(), *g)
		}
		if !usesDatasourceVariable(p.Datasource) {
			t.Errorf(`%s: datasource %s, want {"type": "prometheus", "uid": "${datasource}"}`, p.name(), toString(p.Datasource))
		}
		exprs := 0
		refIDs := map[string]bool{}
		for i, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) != "" {
				exprs++
			}
			switch {
			case tg.RefID == "":
				t.Errorf("%s: target %d has no refId", p.name(), i)
			case refIDs[tg.RefID]:
				t.Errorf("%s: refId %q used twice", p.name(), tg.RefID)
			}
			refIDs[tg.RefID] = true
			if tg.Datasource != nil && !usesDatasourceVariable(tg.Datasource) {
				t.Errorf(`%s: target %s: datasource %s, want {"type": "prometheus", "uid": "${datasource}"}`, p.name(), tg.RefID, toString(tg.Datasource))
			}
		}
		if exprs == 0 {
			t.Errorf("%s: no target with a PromQL expr", p.name())
		}
	}

	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if v, ok := vars["datasource"]; !ok {
		t.Error(`templating: no "datasource" variable`)
	} else if v.Type != "datasource" || v.Query != "prometheus" {
		t.Errorf(`templating: variable "datasource" is type %q, query %s; want type "datasource", query "prometheus"`, v.Type, toString(v.Query))
	}
	if v, ok := vars["source"]; !ok {
		t.Error(`templating: no "source" variable`)
	} else if v.Type != "query" || !v.Multi || !v.IncludeAll {
		t.Errorf(`templating: variable "source" is type %q, multi %v, includeAll %v; want a query variable, multi and includeAll`, v.Type, v.Multi, v.IncludeAll)
	}
}

func usesDatasourceVariable(ds *datasource) bool {
	return ds != nil && ds.Type == "prometheus" && ds.UID == "${datasource}"
}

// Every metric the dashboard queries is one hookline exposes, and every
// metric docs/operations.md lists is on the dashboard.
func TestDashboardMetrics(t *testing.T) {
	t.Parallel()
	d := loadDashboard(t)
	exposed := exposedMetrics(t)

	queried := map[string]bool{}
	check := func(where, expr string) {
		for _, name := range metricName.FindAllString(expr, -1) {
			base := baseName(name, exposed)
			if _, ok := exposed[base]; !ok {
				t.Errorf("%s queries %s, which hookline does not expose (exposed: %v)", where, name, slices.Sorted(maps.Keys(exposed)))
				continue
			}
			queried[base] = true
		}
	}
	for _, p := range allPanels(d) {
		for _, tg := range p.Targets {
			check(p.name()+" target "+tg.RefID, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		check("variable "+v.Name, v.Definition+" "+toString(v.Query))
	}
	if len(queried) == 0 {
		t.Fatal("the dashboard queries no hookline metric")
	}

	documented := map[string]bool{}
	for _, name := range metricName.FindAllString(metricsSection(t), -1) {
		documented[baseName(name, exposed)] = true
	}
	if len(documented) == 0 {
		t.Fatalf(`%s: the "## Metrics" section names no hookline_ metric`, operationsPath)
	}
	for _, name := range slices.Sorted(maps.Keys(documented)) {
		if _, skip := notOnDashboard[name]; skip {
			continue
		}
		if !queried[name] {
			t.Errorf("%s lists %s, but no dashboard panel queries it (add a panel, or an entry with a reason in notOnDashboard)", operationsPath, name)
		}
	}
	for name := range notOnDashboard {
		if !documented[name] {
			t.Errorf("notOnDashboard lists %s, which %s does not: remove it", name, operationsPath)
		}
	}
}

// documentedRow matches a metric as the first cell of the "## Metrics"
// table writes it: its name and, if it has any, its labels.
var documentedRow = regexp.MustCompile("`(hookline_[a-z_]+)(?:\\{([a-z_,]+)\\})?`")

// Every metric hookline exposes is in docs/operations.md's "## Metrics"
// table, with the labels it has; every metric the table lists is exposed.
func TestMetricsTableListsEveryMetric(t *testing.T) {
	t.Parallel()
	exposed := exposedFamilies(t)
	documented := map[string][]string{}
	for _, line := range strings.Split(metricsSection(t), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(line, "|") {
			continue
		}
		for _, m := range documentedRow.FindAllStringSubmatch(cells[1], -1) {
			labels := []string{}
			if m[2] != "" {
				labels = strings.Split(m[2], ",")
			}
			slices.Sort(labels)
			documented[m[1]] = labels
		}
	}
	for _, name := range slices.Sorted(maps.Keys(exposed)) {
		labels, ok := documented[name]
		switch {
		case !ok:
			t.Errorf("%s: the Metrics table does not list %s, which hookline exposes: add a row", operationsPath, name)
		case !slices.Equal(labels, exposed[name].labels):
			t.Errorf("%s: the Metrics table gives %s the labels %v; it has %v", operationsPath, name, labels, exposed[name].labels)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(documented)) {
		if _, ok := exposed[name]; !ok {
			t.Errorf("%s: the Metrics table lists %s, which hookline does not expose", operationsPath, name)
		}
	}
}
