package main

// weft plot --cbench: the same pictures from examples/cbench's text output
// (the C-ABI acceptance runs), weft's log beside the baseline's, one SVG
// per collective and data type.

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/weftccl/weft/hal"
)

// cbenchRow is one size of a cbench table, out of place (what the plots
// draw).
type cbenchRow struct {
	size       int64
	typ, redop string
	tus, busbw float64
	wrong      int64
	root       string
	count      int64
}

// cbenchLog is a parsed cbench output: its rank count and, per
// "collective/type", the rows in the order printed.
type cbenchLog struct {
	nranks int
	tables map[string][]cbenchRow
}

var (
	cbenchHeader = regexp.MustCompile(`^# cbench: (\d+) ranks`)
	cbenchColl   = regexp.MustCompile(`^#\s*([a-z_]+)\s*$`)
)

// readCbench parses cbench's output. Errors wrap hal.ErrSystem (unreadable)
// or hal.ErrInvalidArgument (no table, or a malformed row, named by line).
func readCbench(path string) (*cbenchLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("plot: %v: %w", err, hal.ErrSystem)
	}
	defer f.Close()
	l := &cbenchLog{tables: map[string][]cbenchRow{}}
	coll := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := cbenchHeader.FindStringSubmatch(line); m != nil {
			l.nranks, _ = strconv.Atoi(m[1])
			continue
		}
		if m := cbenchColl.FindStringSubmatch(line); m != nil {
			coll = m[1]
			continue
		}
		fs := strings.Fields(line)
		if coll == "" || len(fs) < 9 || strings.HasPrefix(line, "#") {
			continue
		}
		if _, err := strconv.ParseInt(fs[0], 10, 64); err != nil {
			continue // a message, not a row
		}
		r, err := parseCbenchRow(fs)
		if err != nil {
			return nil, fmt.Errorf("plot: %s line %d: %v: %w", path, n, err, hal.ErrInvalidArgument)
		}
		key := coll + "/" + r.typ
		l.tables[key] = append(l.tables[key], r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("plot: %s: %v: %w", path, err, hal.ErrSystem)
	}
	if len(l.tables) == 0 {
		return nil, fmt.Errorf("plot: %s has no cbench table: %w", path, hal.ErrInvalidArgument)
	}
	return l, nil
}

// parseCbenchRow reads the out-of-place columns of "size count type redop
// root oop(us) algbw busbw #wrong [ip(us) algbw busbw #wrong] [host(us)]".
func parseCbenchRow(fs []string) (cbenchRow, error) {
	var r cbenchRow
	var err error
	num := func(i int) float64 {
		if err != nil {
			return 0
		}
		var v float64
		v, err = strconv.ParseFloat(fs[i], 64)
		if err != nil {
			err = fmt.Errorf("column %d (%q): not a number", i+1, fs[i])
		}
		return v
	}
	r.size = int64(num(0))
	r.count = int64(num(1))
	r.typ, r.redop, r.root = fs[2], fs[3], fs[4]
	r.tus, r.busbw, r.wrong = num(5), num(7), int64(num(8))
	return r, err
}

// cbenchReports pairs weft's log with the baseline's (nil: none) into one
// report per collective and type, sorted by name; machine and date go into
// the titles.
func cbenchReports(weft, base *cbenchLog, baseName, machine, date string) []*benchReport {
	keys := make([]string, 0, len(weft.tables))
	for k := range weft.tables {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []*benchReport
	for _, k := range keys {
		coll := k[:strings.Index(k, "/")]
		r := &benchReport{machineLine: machine}
		r.Config.NRanks, r.Config.Collective, r.Config.Date, r.Config.Baseline = weft.nranks, coll, date, baseName
		var bs map[int64]cbenchRow
		if base != nil {
			bs = map[int64]cbenchRow{}
			for _, b := range base.tables[k] {
				bs[b.size] = b
			}
		}
		for _, w := range weft.tables[k] {
			res := sizeResult{Size: w.size, Count: w.count, Type: w.typ, Redop: w.redop, Root: w.root,
				OutOfPlace: measurement{TimeUS: w.tus, BusBW: w.busbw, Wrong: w.wrong}}
			if b, ok := bs[w.size]; ok {
				res.Baseline = &baselineRes{Name: baseName, OutOfPlace: measurement{TimeUS: b.tus, BusBW: b.busbw, Wrong: b.wrong}}
				if w.tus > 0 {
					res.Baseline.SpeedupOutOfPlace = b.tus / w.tus
				}
			}
			r.Results = append(r.Results, res)
		}
		out = append(out, r)
	}
	return out
}

// writeCbenchPlots draws every report of cbenchReports into dir as
// COLLECTIVE-TYPE.svg and returns the files written.
func writeCbenchPlots(dir string, reports []*benchReport) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plot: %v: %w", err, hal.ErrSystem)
	}
	var files []string
	for _, r := range reports {
		name := fmt.Sprintf("%s-%s.svg", collectiveName(r.Config.Collective), r.Results[0].Type)
		p := filepath.Join(dir, name)
		if err := writePlot(p, r); err != nil {
			return files, err
		}
		files = append(files, p)
	}
	return files, nil
}

// plotCbench is weft plot --cbench.
func plotCbench(cmd *cobra.Command) error {
	if plotOpts.json != "" {
		return fmt.Errorf("plot: -J and --cbench exclude each other: %w", hal.ErrInvalidArgument)
	}
	if plotOpts.out == "" {
		return fmt.Errorf("plot: --cbench needs -o DIRECTORY: %w", hal.ErrInvalidArgument)
	}
	weft, err := readCbench(plotOpts.cbench)
	if err != nil {
		return err
	}
	var base *cbenchLog
	if plotOpts.cbenchBase != "" {
		if base, err = readCbench(plotOpts.cbenchBase); err != nil {
			return err
		}
	}
	files, err := writeCbenchPlots(plotOpts.out, cbenchReports(weft, base, "nccl", plotOpts.machine, plotOpts.on))
	for _, f := range files {
		fmt.Fprintln(cmd.OutOrStdout(), f)
	}
	return err
}
