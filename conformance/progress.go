package conformance

import (
	"fmt"
	"io"

	"github.com/schollz/progressbar/v3"
)

// progress shows which test runs, as a bar on a terminal; a nil *progress
// shows nothing.
type progress struct {
	bar *progressbar.ProgressBar
}

func newProgress(w io.Writer, total int) *progress {
	if w == nil || total == 0 {
		return nil
	}
	return &progress{bar: progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("conformance"),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionShowDescriptionAtLineEnd(),
		progressbar.OptionClearOnFinish(),
	)}
}

// step announces the next test and counts the previous one as done.
func (p *progress) step(backend, id string) {
	if p == nil {
		return
	}
	p.bar.Describe(fmt.Sprintf("%s %s", backend, id))
	p.bar.Add(1)
}

func (p *progress) finish() {
	if p == nil {
		return
	}
	p.bar.Finish()
}
