package ncclxml_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weftccl/weft/topology/ncclxml"
)

func TestParse(t *testing.T) {
	in := `<!-- dumped by NCCL -->
<system version="1">
  <cpu numaid="0" affinity="0000ffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:18:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
      <gpu dev="0" sm="90" rank="0" gdr="1">
        <nvlink target="fffffff:ffff:ff" count="18" tclass="0x068000"/>
      </gpu>
    </pci>
  </cpu>
</system>
`
	sys, err := ncclxml.Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	nv := sys.Subs[0].Subs[0].Subs[0].Subs[0]
	want := &ncclxml.Node{Name: "nvlink", Attrs: []ncclxml.Attr{{"target", "fffffff:ffff:ff"}, {"count", "18"}, {"tclass", "0x068000"}}}
	if diff := cmp.Diff(want, nv); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestParseRejects lists what NCCL's reader (src/graph/xml.cc) refuses.
func TestParseRejects(t *testing.T) {
	tests := map[string]string{
		"declaration":       `<?xml version="1.0"?><system version="1"></system>`,
		"tab indent":        "<system version=\"1\">\n\t<cpu numaid=\"0\"/>\n</system>",
		"unquoted":          `<system version=1></system>`,
		"unterminated":      `<system version="1"><cpu numaid="0">`,
		"mismatch":          `<system version="1"><cpu numaid="0"></pci></system>`,
		"wrong version":     `<system version="2"></system>`,
		"no system":         `<cpu numaid="0"/>`,
		"text content":      `<system version="1">hello</system>`,
		"long value":        `<system version="1" name="` + strings.Repeat("x", 300) + `"></system>`,
		"duplicate attr":    `<system version="1" version="1"></system>`,
		"unterminated note": `<!-- never closed <system version="1"></system>`,
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ncclxml.Parse(strings.NewReader(in))
			if !errors.Is(err, ncclxml.ErrSyntax) {
				t.Fatalf("Parse = %v, want ErrSyntax", err)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add(`<system version="1"><cpu numaid="0" arch="x86_64"><pci busid="0000:01:00.0"/></cpu></system>`)
	f.Add(`<!-- x --><system version="1"/>`)
	f.Fuzz(func(t *testing.T, s string) {
		sys, err := ncclxml.Parse(strings.NewReader(s))
		if err == nil && sys.Name != "system" {
			t.Fatalf("Parse returned <%s>", sys.Name)
		}
	})
}
