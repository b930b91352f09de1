// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"strconv"
	"time"
)

// The latency CDF as a PNG, drawn with the standard library alone: axes, a
// grid, tick labels in a 3×5 pixel font (digits, '.', '%', "ms"), and the
// curve. x is latency in milliseconds up to the maximum, y the fraction of
// deliveries.

const (
	plotW, plotH = 720, 440
	marginL      = 60
	marginR      = 24
	marginT      = 20
	marginB      = 44
	glyphScale   = 2
)

var (
	colBackground = color.RGBA{255, 255, 255, 255}
	colAxis       = color.RGBA{40, 40, 40, 255}
	colGrid       = color.RGBA{225, 225, 225, 255}
	colCurve      = color.RGBA{31, 119, 180, 255}
	colMark       = color.RGBA{214, 39, 40, 255}
)

// glyphs are 3 columns × 5 rows, a row per entry, the high bit leftmost.
var glyphs = map[rune][5]uint8{
	'0': {7, 5, 5, 5, 7}, '1': {2, 6, 2, 2, 7}, '2': {7, 1, 7, 4, 7}, '3': {7, 1, 7, 1, 7},
	'4': {5, 5, 7, 1, 1}, '5': {7, 4, 7, 1, 7}, '6': {7, 4, 7, 5, 7}, '7': {7, 1, 1, 1, 1},
	'8': {7, 5, 7, 5, 7}, '9': {7, 5, 7, 1, 7}, '.': {0, 0, 0, 0, 2}, '%': {5, 1, 2, 4, 5},
	'm': {0, 0, 7, 7, 5}, 's': {0, 7, 6, 3, 7}, 'p': {0, 7, 5, 7, 4},
}

type canvas struct{ *image.RGBA }

func (c canvas) dot(x, y int, col color.RGBA) {
	if image.Pt(x, y).In(c.Bounds()) {
		c.SetRGBA(x, y, col)
	}
}

func (c canvas) hline(x0, x1, y int, col color.RGBA) {
	for x := x0; x <= x1; x++ {
		c.dot(x, y, col)
	}
}

func (c canvas) vline(x, y0, y1 int, col color.RGBA) {
	for y := y0; y <= y1; y++ {
		c.dot(x, y, col)
	}
}

// line draws a two-pixel-wide segment (Bresenham).
func (c canvas) line(x0, y0, x1, y1 int, col color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		c.dot(x0, y0, col)
		c.dot(x0, y0-1, col)
		if x0 == x1 && y0 == y1 {
			return
		}
		if e2 := 2 * e; e2 >= dy {
			e += dy
			x0 += sx
		} else {
			e += dx
			y0 += sy
		}
	}
}

// text draws s with its top-left corner at (x, y) and returns its width.
func (c canvas) text(x, y int, s string, col color.RGBA) int {
	w := 0
	for _, r := range s {
		g, ok := glyphs[r]
		if ok {
			for row, bits := range g {
				for colIdx := range 3 {
					if bits&(4>>colIdx) == 0 {
						continue
					}
					for dy := range glyphScale {
						for dx := range glyphScale {
							c.dot(x+w+colIdx*glyphScale+dx, y+row*glyphScale+dy, col)
						}
					}
				}
			}
		}
		w += 4 * glyphScale
	}
	return w
}

func textWidth(s string) int { return len([]rune(s)) * 4 * glyphScale }

// writeCDF draws the latency CDF of res as a PNG.
func writeCDF(w io.Writer, res *Result) error {
	img := canvas{image.NewRGBA(image.Rect(0, 0, plotW, plotH))}
	for y := range plotH {
		img.hline(0, plotW-1, y, colBackground)
	}
	x0, y0 := marginL, plotH-marginB // origin
	x1, y1 := plotW-marginR, marginT
	step := niceStep(float64(time.Duration(res.Latency.Max)) / float64(time.Millisecond) / 5)
	ticks := max(int(math.Ceil(float64(time.Duration(res.Latency.Max))/float64(time.Millisecond)/step)), 1)
	xmax := float64(ticks) * step
	px := func(ms float64) int { return x0 + int(math.Round(ms/xmax*float64(x1-x0))) }
	py := func(f float64) int { return y0 - int(math.Round(f*float64(y0-y1))) }

	// Grid and ticks.
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 1} {
		img.hline(x0, x1, py(f), colGrid)
		label := strconv.Itoa(int(f*100)) + "%"
		img.text(x0-8-textWidth(label), py(f)-5, label, colAxis)
	}
	for i := 0; i <= ticks; i++ {
		ms := float64(i) * step
		img.vline(px(ms), y1, y0, colGrid)
		label := strconv.FormatFloat(ms, 'f', -1, 64)
		if i == ticks {
			label += "ms"
		}
		img.text(px(ms)-textWidth(label)/2, y0+10, label, colAxis)
	}
	img.hline(x0, x1, y0, colAxis)
	img.vline(x0, y1, y0, colAxis)

	// p99 marker.
	p99 := float64(time.Duration(res.Latency.P99)) / float64(time.Millisecond)
	for y := y1; y <= y0; y += 6 {
		img.vline(px(p99), y, y+2, colMark)
	}
	img.text(px(p99)+4, y1+4, "p99", colMark)

	// The curve: a step up from 0 at the origin.
	lx, ly := x0, py(0)
	for _, p := range res.Latency.CDF {
		x, y := px(float64(time.Duration(p.Latency))/float64(time.Millisecond)), py(p.Fraction)
		img.line(lx, ly, x, ly, colCurve)
		img.line(x, ly, x, y, colCurve)
		lx, ly = x, y
	}
	return png.Encode(w, img.RGBA)
}

// niceStep rounds v up to 1, 2, 2.5 or 5 times a power of ten: a tick step.
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func sign(x int) int {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}
