package main

import (
	"testing"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

func panels(t *testing.T) []*panel {
	t.Helper()
	var ps []*panel
	for _, sc := range scenarios() {
		ss, err := simulate(sc)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, newPanel(sc, ss))
	}
	return ps
}

// flat is a horizontal stretch of a step line: y from x0 to x1.
type flat struct{ x0, x1, y float64 }

func flats(l *plotter.Line) []flat {
	var fs []flat
	for i := 0; i+1 < len(l.XYs); i++ {
		fs = append(fs, flat{l.XYs[i].X, l.XYs[i+1].X, l.XYs[i].Y})
	}
	return fs
}

// shared reports a stretch where a and b draw the same line.
func shared(a, b *plotter.Line) (flat, bool) {
	for _, f := range flats(a) {
		for _, g := range flats(b) {
			if f.y == g.y && max(f.x0, g.x0) < min(f.x1, g.x1) {
				return flat{max(f.x0, g.x0), min(f.x1, g.x1), f.y}, true
			}
		}
	}
	return flat{}, false
}

// TestNoLineHidden checks that wherever two series draw the same stretch,
// the one drawn on top is narrower than the one below it, so that both
// show: the sliding window counter, which admits what the sliding log
// does in the burst, was once drawn under it, and invisible.
func TestNoLineHidden(t *testing.T) {
	for pi, p := range panels(t) {
		for i, below := range p.drawn {
			for _, above := range p.drawn[i+1:] {
				if f, ok := shared(below, above); ok && above.Width >= below.Width {
					t.Errorf("panel %d: a line %vpt wide lies on one %vpt wide at y=%v from %vs to %vs, hiding it",
						pi+1, above.Width, below.Width, f.y, f.x0, f.x1)
				}
			}
		}
		if len(p.drawn) != len(styles) {
			t.Errorf("panel %d: %d lines drawn, want %d", pi+1, len(p.drawn), len(styles))
		}
	}
}

// TestLegendsOutsidePlots checks that each legend lies beside the plots,
// overlapping none of them (data, gridlines, axes, title), and fits its
// column of the figure.
func TestLegendsOutsidePlots(t *testing.T) {
	ps := panels(t)
	dc := draw.New(vgimg.New(figWidth, figHeight))
	plots, legends := layout(dc, ps)
	for i, p := range ps {
		r := p.legend.Rectangle(legends[i])
		if r.Min.X < legends[i].Min.X || r.Max.X > dc.Max.X || r.Min.Y < legends[i].Min.Y || r.Max.Y > legends[i].Max.Y {
			t.Errorf("legend %d at %v, want inside its column %v", i+1, r, legends[i].Rectangle)
		}
		for j, pc := range plots {
			if overlaps(r, pc.Rectangle) {
				t.Errorf("legend %d at %v overlaps plot %d at %v", i+1, r, j+1, pc.Rectangle)
			}
		}
	}
}

// overlaps reports whether two rectangles share any area.
func overlaps(a, b vg.Rectangle) bool {
	return a.Min.X < b.Max.X && b.Min.X < a.Max.X && a.Min.Y < b.Max.Y && b.Min.Y < a.Max.Y
}
