package console

import (
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/jobs"
)

// Chart geometry, in the SVG's own units: one step per minute, the lines
// between a top and bottom margin so that they never touch the frame.
const (
	chartStep   = 10
	chartWidth  = chartStep * (jobs.OverviewMinutes - 1)
	chartHeight = 120
	chartTop    = 6
	chartBottom = 114
)

// chart is one source's hour drawn on the server: a polyline per series
// over a shared scale whose top is Max per minute.
type chart struct {
	Source        string
	Series        []series
	Max           int
	Since, Until  time.Time
	Width, Height int
	MidY          int // the y of Max/2, for a grid line
	// Uncounted is the width of the minutes not counted yet (shaded).
	Uncounted int
}

// series is one line of a chart.
type series struct {
	Name   string // received, accepted, duplicate, failed
	Points string // "x,y x,y …" in the SVG's units
	Total  int    // over the hour
	Now    int    // in the current minute
}

func chartOf(a jobs.SourceActivity, since, countedSince time.Time) chart {
	all := []struct {
		name string
		v    [jobs.OverviewMinutes]int
	}{{"received", a.Received}, {"accepted", a.Accepted}, {"duplicate", a.Duplicate}, {"failed", a.Failed}}
	top := 0
	for _, s := range all {
		for _, v := range s.v {
			top = max(top, v)
		}
	}
	top = niceCeil(top)
	ch := chart{Source: a.Source, Max: top, Since: since, Until: since.Add(jobs.OverviewMinutes * time.Minute),
		Width: chartWidth, Height: chartHeight, MidY: y(top/2, top)}
	if n := int(countedSince.Sub(since) / time.Minute); n > 0 {
		ch.Uncounted = min(n, jobs.OverviewMinutes-1) * chartStep
	}
	for _, s := range all {
		var pts strings.Builder
		total := 0
		for i, v := range s.v {
			if i > 0 {
				pts.WriteByte(' ')
			}
			pts.WriteString(strconv.Itoa(i*chartStep) + "," + strconv.Itoa(y(v, top)))
			total += v
		}
		ch.Series = append(ch.Series, series{Name: s.name, Points: pts.String(), Total: total, Now: s.v[len(s.v)-1]})
	}
	return ch
}

// y is where v sits on a scale whose top is top.
func y(v, top int) int {
	return chartBottom - v*(chartBottom-chartTop)/top
}

// niceCeil is the smallest of 1, 2, 5 × 10^k that is at least n (at least 1).
func niceCeil(n int) int {
	for p := 1; ; p *= 10 {
		for _, m := range []int{1, 2, 5} {
			if m*p >= n {
				return m * p
			}
		}
	}
}
