// Command plot replays one arrival pattern (a client bursting at a
// fixed-window boundary, and a steady client over the limit) through a
// fixed-window reference and each of the limiter's algorithms, and draws
// how many requests each admitted in the trailing window, against the
// limit. It writes SVG and PNG:
//
//	go -C examples run ./plot            # writes docs/algorithms.{svg,png}
package main

import (
	"flag"
	"fmt"
	"image/color"
	"io"
	"log"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

func main() {
	dir := flag.String("dir", filepath.Join("..", "docs"), "directory to write algorithms.svg and algorithms.png to")
	flag.Parse()
	if err := run(*dir, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run simulates every scenario, prints each algorithm's worst window and
// writes the pictures into dir.
func run(dir string, out io.Writer) error {
	sans := font.Font{Typeface: "Liberation", Variant: "Sans"}
	plot.DefaultFont, plotter.DefaultFont = sans, sans
	var panels []*panel
	for _, sc := range scenarios() {
		ss, err := simulate(sc)
		if err != nil {
			return err
		}
		panels = append(panels, newPanel(sc, ss))
		fmt.Fprintln(out, sc.name)
		for _, s := range ss {
			fmt.Fprintf(out, "  %-36s admitted %2d of %2d, most in one %v window: %2d (limit %d)\n",
				s.name, len(s.admitted), len(sc.arrivals), window, s.max, limit)
		}
	}

	svg := vgsvg.New(figWidth, figHeight)
	png := vgimg.NewWith(vgimg.UseWH(figWidth, figHeight), vgimg.UseDPI(110))
	render(svg, panels)
	render(png, panels)
	if err := write(filepath.Join(dir, "algorithms.svg"), svg.WriteTo); err != nil {
		return err
	}
	return write(filepath.Join(dir, "algorithms.png"), vgimg.PngCanvas{Canvas: png}.WriteTo)
}

// The figure's size, and the width of the column the legends take on its
// right.
const (
	figWidth, figHeight = 14 * vg.Inch, 9 * vg.Inch
	legendWidth         = 3.9 * vg.Inch
)

// panel is one scenario's plot, its legend, and its series' lines in the
// order they are drawn: a later line lies on top of an earlier one.
type panel struct {
	plot   *plot.Plot
	legend plot.Legend
	drawn  []*plotter.Line
}

// layout places the panels one above the other on dc: each plot on the
// left, aligned with the others, and its legend in a column to its right,
// outside the plot, so that it hides no line, gridline or label.
func layout(dc draw.Canvas, panels []*panel) (plots, legends []draw.Canvas) {
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	left := draw.Crop(dc, 0, -legendWidth, 0, 0)
	right := draw.Crop(dc, dc.Max.X-dc.Min.X-legendWidth, 0, 0, 0)
	ps := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		ps[i] = []*plot.Plot{p.plot}
	}
	for i, row := range plot.Align(ps, tiles, left) {
		plots = append(plots, row[0])
		// Level with the top of the plot's data area, below its title.
		lc := tiles.At(right, 0, i)
		lc.Max.Y = panels[i].plot.DataCanvas(row[0]).Max.Y
		legends = append(legends, lc)
	}
	return plots, legends
}

// render draws the panels on c.
func render(c vg.CanvasSizer, panels []*panel) {
	plots, legends := layout(draw.New(c), panels)
	for i, p := range panels {
		p.plot.Draw(plots[i])
		p.legend.Draw(legends[i])
	}
}

func write(path string, to func(io.Writer) (int64, error)) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := to(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// styles of the series, by position. Series often coincide (in the
// burst, the sliding window counter admits exactly what the sliding log
// does; later in the steady run the fixed window and GCRA sit at the
// limit with it), so none may hide another: the sliding log is drawn
// first, as a wide translucent band, and the others on top of it, thinner,
// each in a dash of its own and nudged a fraction of a request up or down
// (offset), so that coinciding lines run side by side within the band.
var styles = []struct {
	color  color.Color
	width  vg.Length
	dash   []vg.Length
	offset float64 // in requests
	order  int     // drawing order: higher is on top
}{
	{color.NRGBA{R: 230, G: 120, B: 20, A: 255}, 2, nil, 0, 1},                                           // fixed window
	{color.NRGBA{R: 30, G: 100, B: 220, A: 110}, 10, nil, 0, 0},                                          // sliding log
	{color.NRGBA{R: 0, G: 130, B: 60, A: 255}, 2, []vg.Length{vg.Points(7), vg.Points(4)}, -0.3, 3},      // sliding window counter
	{color.NRGBA{R: 150, G: 60, B: 170, A: 255}, 2, []vg.Length{vg.Points(1.5), vg.Points(2.5)}, 0.3, 2}, // GCRA
}

// overColor shades what lies over the limit.
var overColor = color.NRGBA{R: 220, G: 40, B: 40, A: 40}

// newPanel draws one scenario: each series' trailing-window count as a
// step line, the region over the limit shaded, and the arrivals along the
// bottom.
func newPanel(sc scenario, ss []series) *panel {
	p := plot.New()
	p.Title.Text = sc.name
	p.Title.TextStyle.Font.Size = font.Length(13)
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = fmt.Sprintf("admitted in the last %v", window)
	p.X.Min, p.X.Max = 0, horizon.Seconds()
	p.Y.Min, p.Y.Max = -2, 2*limit+4
	p.X.Tick.Marker = plot.ConstantTicks(ticks(0, horizon.Seconds(), 5, 10))
	p.Y.Tick.Marker = plot.ConstantTicks(ticks(0, 2*limit, 2, limit))
	leg := plot.NewLegend()
	leg.Top, leg.Left = true, true
	leg.TextStyle.Font.Size = font.Length(11)
	leg.ThumbnailWidth = vg.Points(36)
	leg.Padding = vg.Points(5)

	over, _ := plotter.NewPolygon(plotter.XYs{{X: 0, Y: limit}, {X: horizon.Seconds(), Y: limit}, {X: horizon.Seconds(), Y: p.Y.Max}, {X: 0, Y: p.Y.Max}})
	over.Color, over.LineStyle.Width = overColor, 0
	p.Add(over, plotter.NewGrid())

	lines := make([]*plotter.Line, len(ss))
	for i, s := range ss {
		st := styles[i%len(styles)]
		xys := stepXYs(trailing(s.admitted, window))
		for j := range xys {
			xys[j].Y += st.offset
		}
		l, _ := plotter.NewLine(xys)
		l.StepStyle = plotter.PostStep
		l.Color, l.Width, l.Dashes = st.color, st.width, st.dash
		lines[i] = l
		leg.Add(fmt.Sprintf("%s: at most %d", s.name, s.max), l)
	}
	drawn := slices.Clone(lines)
	slices.SortStableFunc(drawn, func(a, b *plotter.Line) int {
		return styles[slices.Index(lines, a)%len(styles)].order - styles[slices.Index(lines, b)%len(styles)].order
	})
	for _, l := range drawn {
		p.Add(l)
	}
	leg.Add(fmt.Sprintf("over the limit of %d per %v", limit, window), over)

	sent := make(plotter.XYs, len(sc.arrivals))
	for i, t := range sc.arrivals {
		sent[i] = plotter.XY{X: t.Seconds(), Y: -1}
	}
	dots, _ := plotter.NewScatter(sent)
	dots.GlyphStyle = draw.GlyphStyle{Color: color.Gray{Y: 90}, Radius: vg.Points(1.6), Shape: draw.CircleGlyph{}}
	p.Add(dots)
	leg.Add("requests sent", dots)
	return &panel{plot: p, legend: leg, drawn: drawn}
}

// stepXYs turns steps into points for a post-step line that runs to the
// horizon.
func stepXYs(steps []step) plotter.XYs {
	xys := make(plotter.XYs, 0, len(steps)+1)
	for _, s := range steps {
		if s.t >= horizon {
			break
		}
		xys = append(xys, plotter.XY{X: s.t.Seconds(), Y: float64(s.count)})
	}
	last := xys[len(xys)-1]
	return append(xys, plotter.XY{X: horizon.Seconds(), Y: last.Y})
}

// ticks returns ticks from lo to hi every step, labelled every label.
func ticks(lo, hi, step, label float64) []plot.Tick {
	var ts []plot.Tick
	for v := lo; v <= hi+1e-9; v += step {
		t := plot.Tick{Value: v}
		if int(v)%int(label) == 0 {
			t.Label = fmt.Sprint(v)
		}
		ts = append(ts, t)
	}
	return ts
}
