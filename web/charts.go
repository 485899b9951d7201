package web

import (
	"fmt"
	"slices"
	"strings"

	"github.com/feval/feval/scoring"
)

// Charts are SVG drawn by the templates from the integer geometry computed
// here; every label goes through html/template like any other string.

// palette colours the series of a chart; it repeats past its end.
var palette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"}

func colour(i int) string { return palette[i%len(palette)] }

// Chart limits: a verdict cannot make a chart of unbounded size.
const (
	maxScenarios = 200
	maxModels    = 32
	maxCostItems = 1 << 20
)

// CostChart is the metered cost per scenario and model, in micro-USD, and
// its drawing: one stacked bar per scenario, one colour per model.
type CostChart struct {
	Scenarios []string `json:"scenarios"`
	Models    []string `json:"models"`
	// MicroUSD[i][j] is the cost of scenario i on model j.
	MicroUSD [][]int64 `json:"micro_usd"`
	// TotalMicroUSD[i] is scenario i's total.
	TotalMicroUSD []int64 `json:"total_micro_usd"`
	Width         int     `json:"-"`
	Height        int     `json:"-"`
	Bars          []hbar  `json:"-"`
	Legend        []swatch
}

type hbar struct {
	Label    string
	Y, TextY int
	Total    string
	TotalX   int
	Segments []segment
}

type segment struct {
	X, Y  int
	Width int
	Fill  string
	Title string
}

type swatch struct {
	Label string `json:"label"`
	Fill  string `json:"fill"`
}

// costTable accumulates cost entries: objects with a "scenario" (or
// "scenario_id") string, a "model" string and an integer member named
// "cost_micro_usd" or, failing that, the first ending in "_micro_usd".
type costTable struct {
	cost  map[[2]string]int64
	items int
}

func newCostTable() *costTable { return &costTable{cost: map[[2]string]int64{}} }

func (c *costTable) walk(v any) {
	switch t := v.(type) {
	case map[string]any:
		c.entry(t)
		for _, k := range sortedKeys(t) {
			c.walk(t[k])
		}
	case []any:
		for _, x := range t {
			c.walk(x)
		}
	}
}

func (c *costTable) entry(m map[string]any) {
	sc := str(m, "scenario")
	if sc == "" {
		sc = str(m, "scenario_id")
	}
	model := str(m, "model")
	if sc == "" || model == "" || c.items >= maxCostItems {
		return
	}
	n, ok := integer(m["cost_micro_usd"])
	if !ok {
		for _, k := range sortedKeys(m) {
			if strings.HasSuffix(k, "_micro_usd") {
				if n, ok = integer(m[k]); ok {
					break
				}
			}
		}
	}
	if !ok || n < 0 {
		return
	}
	c.items++
	c.cost[[2]string{sc, model}] += n
}

func (c *costTable) chart() *CostChart {
	if len(c.cost) == 0 {
		return nil
	}
	var scenarios, models []string
	for k := range c.cost {
		scenarios = append(scenarios, k[0])
		models = append(models, k[1])
	}
	slices.Sort(scenarios)
	slices.Sort(models)
	scenarios = slices.Compact(scenarios)
	models = slices.Compact(models)
	if len(scenarios) > maxScenarios {
		scenarios = scenarios[:maxScenarios]
	}
	if len(models) > maxModels {
		models = models[:maxModels]
	}
	ch := &CostChart{Scenarios: scenarios, Models: models}
	var most int64
	for _, sc := range scenarios {
		row := make([]int64, len(models))
		var total int64
		for j, m := range models {
			row[j] = c.cost[[2]string{sc, m}]
			total += row[j]
		}
		ch.MicroUSD = append(ch.MicroUSD, row)
		ch.TotalMicroUSD = append(ch.TotalMicroUSD, total)
		most = max(most, total)
	}
	const labelW, barW, rowH, top = 180, 440, 24, 8
	ch.Width, ch.Height = labelW+barW+110, top+rowH*len(scenarios)+8
	for j, m := range models {
		ch.Legend = append(ch.Legend, swatch{Label: m, Fill: colour(j)})
	}
	for i, sc := range scenarios {
		b := hbar{Label: clip(sc, 28), Y: top + i*rowH, TextY: top + i*rowH + 15, Total: usd(ch.TotalMicroUSD[i])}
		x := labelW
		for j, n := range ch.MicroUSD[i] {
			if n == 0 {
				continue
			}
			w := 1
			if most > 0 {
				w = max(1, int(n*barW/most))
			}
			b.Segments = append(b.Segments, segment{X: x, Y: b.Y, Width: w, Fill: colour(j),
				Title: fmt.Sprintf("%s, %s: %s", sc, models[j], usd(n))})
			x += w
		}
		b.TotalX = x + 6
		ch.Bars = append(ch.Bars, b)
	}
	return ch
}

// usd renders micro-USD as dollars, exactly.
func usd(micro int64) string {
	sign := ""
	if micro < 0 {
		sign, micro = "-", -micro
	}
	return fmt.Sprintf("%s$%d.%06d", sign, micro/1_000_000, micro%1_000_000)
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// BarOverTime draws the frontier's bar (held-out loss, lower is better) as
// a step line from launch to the time of the emission split, with a point
// at each frontier event.
type BarOverTime struct {
	Width, Height int
	Points        string // polyline points
	Dots          []dot
	Axis          axis
}

type dot struct {
	X, Y  int
	Title string
}

type axis struct {
	Left, Right, Top, Bottom int
	TopLabel, BottomLabel    string
	EndLabel                 string
	LabelY                   int
}

func barOverTime(h scoring.FrontierHistory, at int64) *BarOverTime {
	const left, right, top, bottom = 110, 620, 12, 212
	end := at
	for _, e := range h.Events {
		end = max(end, e.AtSec)
	}
	end = max(end, 1)
	hi, lo := h.BaselineMicroNats, h.BarMicroNats
	for _, e := range h.Events {
		lo = min(lo, e.BarMicroNats)
	}
	if hi <= lo {
		hi = lo + 1
	}
	x := func(t int64) int { return left + int((t*int64(right-left))/end) }
	y := func(v int64) int { return top + int(((hi-v)*int64(bottom-top))/(hi-lo)) }
	b := &BarOverTime{Width: right + 30, Height: bottom + 40,
		Axis: axis{Left: left, Right: right, Top: top, Bottom: bottom, LabelY: bottom + 18,
			TopLabel: fmt.Sprintf("%d µnats", hi), BottomLabel: fmt.Sprintf("%d µnats", lo), EndLabel: secLabel(end)}}
	var pts []string
	cur := h.BaselineMicroNats
	pts = append(pts, fmt.Sprintf("%d,%d", x(0), y(cur)))
	for _, e := range h.Events {
		pts = append(pts, fmt.Sprintf("%d,%d", x(e.AtSec), y(cur)))
		cur = e.BarMicroNats
		pts = append(pts, fmt.Sprintf("%d,%d", x(e.AtSec), y(cur)))
		b.Dots = append(b.Dots, dot{X: x(e.AtSec), Y: y(cur),
			Title: fmt.Sprintf("height %d at %s: bar %d µnats (-%d)", e.Height, secLabel(e.AtSec), e.BarMicroNats, e.ImprovementMicroNats)})
	}
	pts = append(pts, fmt.Sprintf("%d,%d", x(end), y(cur)))
	b.Points = strings.Join(pts, " ")
	return b
}

func secLabel(s int64) string {
	if s != 0 && s%86400 == 0 {
		return fmt.Sprintf("day %d", s/86400)
	}
	return fmt.Sprintf("%d s", s)
}

// SplitChart draws the emission split as one bar of the u16 vector: a
// segment per contributor and the burn.
type SplitChart struct {
	Width, Height int
	Segments      []segment
	Legend        []swatch
}

func splitChart(e scoring.Emission) *SplitChart {
	const left, barW = 10, 600
	c := &SplitChart{Width: left + barW + 10, Height: 40}
	x := left
	add := func(label string, units uint16, fill string) {
		w := int(int64(units) * barW / int64(scoring.UnitsTotal))
		text := fmt.Sprintf("%s: %d of %d units", label, units, scoring.UnitsTotal)
		if w > 0 {
			c.Segments = append(c.Segments, segment{X: x, Width: w, Fill: fill, Title: text})
		}
		c.Legend = append(c.Legend, swatch{Label: text, Fill: fill})
		x += w
	}
	for i, s := range e.Shares {
		add(clip(s.Contributor, 16), s.Units, colour(i))
	}
	add("burn", e.BurnUnits, "#bab0ac")
	return c
}
