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
	var plots [][]*plot.Plot
	for _, sc := range scenarios() {
		ss, err := simulate(sc)
		if err != nil {
			return err
		}
		plots = append(plots, []*plot.Plot{newPlot(sc, ss)})
		fmt.Fprintln(out, sc.name)
		for _, s := range ss {
			fmt.Fprintf(out, "  %-36s admitted %2d of %2d, most in one %v window: %2d (limit %d)\n",
				s.name, len(s.admitted), len(sc.arrivals), window, s.max, limit)
		}
	}

	const w, h = 11 * vg.Inch, 9 * vg.Inch
	svg := vgsvg.New(w, h)
	png := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
	render(svg, plots)
	render(png, plots)
	if err := write(filepath.Join(dir, "algorithms.svg"), svg.WriteTo); err != nil {
		return err
	}
	return write(filepath.Join(dir, "algorithms.png"), vgimg.PngCanvas{Canvas: png}.WriteTo)
}

// render lays the plots out one above the other on c.
func render(c vg.CanvasSizer, plots [][]*plot.Plot) {
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
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

// styles of the series, by position: the reference first, the sliding log
// drawn thickest and last so it is never hidden.
var styles = []struct {
	color color.Color
	width vg.Length
	dash  []vg.Length
}{
	{color.RGBA{R: 230, G: 120, B: 20, A: 255}, 2, nil},                                       // fixed window
	{color.RGBA{R: 20, G: 90, B: 200, A: 255}, 3.5, nil},                                      // sliding log
	{color.RGBA{R: 40, G: 160, B: 80, A: 255}, 1.6, []vg.Length{vg.Points(6), vg.Points(3)}},  // sliding window counter
	{color.RGBA{R: 150, G: 60, B: 170, A: 255}, 1.6, []vg.Length{vg.Points(2), vg.Points(2)}}, // GCRA
}

var limitColor = color.RGBA{R: 210, G: 30, B: 30, A: 255}

// newPlot draws one scenario: each series' trailing-window count as a
// step line, the limit, and the arrivals along the bottom.
func newPlot(sc scenario, ss []series) *plot.Plot {
	p := plot.New()
	p.Title.Text = sc.name
	p.Title.TextStyle.Font.Size = font.Length(13)
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = fmt.Sprintf("admitted in the last %v", window)
	p.X.Min, p.X.Max = 0, horizon.Seconds()
	p.Y.Min, p.Y.Max = -2, 2*limit+9
	p.X.Tick.Marker = plot.ConstantTicks(ticks(0, horizon.Seconds(), 5, 10))
	p.Y.Tick.Marker = plot.ConstantTicks(ticks(0, 2*limit, 2, limit))
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Millimeter*2, -vg.Millimeter
	p.Legend.TextStyle.Font.Size = font.Length(11)

	lim, _ := plotter.NewLine(plotter.XYs{{X: 0, Y: limit}, {X: horizon.Seconds(), Y: limit}})
	lim.Color, lim.Width, lim.Dashes = limitColor, 1.5, []vg.Length{vg.Points(8), vg.Points(4)}
	p.Add(lim)
	p.Legend.Add(fmt.Sprintf("limit: %d per %v", limit, window), lim)

	// Draw the sliding log last, on top; list the legend in order.
	order := []int{0, 2, 3, 1}
	lines := make([]*plotter.Line, len(ss))
	for i, s := range ss {
		l, _ := plotter.NewLine(stepXYs(trailing(s.admitted, window)))
		l.StepStyle = plotter.PostStep
		st := styles[i%len(styles)]
		l.Color, l.Width, l.Dashes = st.color, st.width, st.dash
		lines[i] = l
	}
	for _, i := range order {
		if i < len(lines) {
			p.Add(lines[i])
		}
	}
	for i, s := range ss {
		p.Legend.Add(fmt.Sprintf("%s: at most %d", s.name, s.max), lines[i])
	}

	sent := make(plotter.XYs, len(sc.arrivals))
	for i, t := range sc.arrivals {
		sent[i] = plotter.XY{X: t.Seconds(), Y: -1}
	}
	dots, _ := plotter.NewScatter(sent)
	dots.GlyphStyle = draw.GlyphStyle{Color: color.Gray{Y: 90}, Radius: vg.Points(1.6), Shape: draw.CircleGlyph{}}
	p.Add(dots)
	p.Legend.Add("requests sent", dots)
	return p
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
