package ncclxml

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/weftccl/weft/hal"
)

// Limits of NCCL's parser (src/graph/xml.h and topo.h): a value or name of
// at most 255 bytes, 640 children per element, 256 elements in a topology
// file. Parse enforces them so that a file weft accepts is one NCCL
// accepts; maxDepth only guards this reader's recursion.
const (
	maxStrLen = 255
	maxSubs   = 640
	maxNodes  = 256
	maxDepth  = 64
)

// ErrSyntax is wrapped by every Parse error; it wraps
// hal.ErrInvalidArgument (the caller passed a bad file).
var ErrSyntax = fmt.Errorf("NCCL topology XML: %w", hal.ErrInvalidArgument)

// Parse reads an NCCL topology file with the grammar of NCCL's parser
// (xmlGetNode and xmlLoadSub in src/graph/xml.cc): elements separated by
// spaces and newlines (not tabs), attributes separated by single spaces
// with quoted values, <!-- --> comments, no text, no <?xml?> declaration.
// It returns the <system> element and checks version="1". Errors give the
// byte offset and wrap ErrSyntax.
func Parse(r io.Reader) (*Node, error) {
	p := &parser{r: bufio.NewReader(r)}
	var sys *Node
	for {
		n, kind, err := p.node()
		if err != nil {
			return nil, err
		}
		if kind == kindNone {
			break
		}
		if kind == kindClose {
			return nil, p.errorf("unexpected closing tag </%s>", n.Name)
		}
		if err := p.children(n, kind, 1); err != nil {
			return nil, err
		}
		if n.Name == "system" && sys == nil {
			sys = n
		}
	}
	if sys == nil {
		return nil, p.errorf("no <system> element")
	}
	if v, _ := sys.Get("version"); v != fmt.Sprint(Version) {
		return nil, fmt.Errorf("<system version=%q>, NCCL needs %d: %w", v, Version, ErrSyntax)
	}
	return sys, nil
}

type kind int

const (
	kindNone kind = iota
	kindOpen
	kindClose
	kindSingle
)

type parser struct {
	r     *bufio.Reader
	off   int
	nodes int
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s: %w", p.off, fmt.Sprintf(format, args...), ErrSyntax)
}

func (p *parser) char() (byte, error) {
	c, err := p.r.ReadByte()
	if errors.Is(err, io.EOF) {
		return 0, p.errorf("unexpected end of file")
	}
	if err != nil {
		return 0, fmt.Errorf("read: %v: %w", err, hal.ErrSystem)
	}
	p.off++
	return c, nil
}

// token reads a name up to ' ', '>', '/', newline or '='; it returns the
// name and the character that ended it.
func (p *parser) token() (string, byte, error) {
	var b strings.Builder
	for {
		c, err := p.char()
		if err != nil {
			return "", 0, err
		}
		switch c {
		case ' ', '>', '/', '\n', '\r', '=':
			return b.String(), c, nil
		}
		if b.Len() == maxStrLen {
			return "", 0, p.errorf("name longer than %d bytes", maxStrLen)
		}
		b.WriteByte(c)
	}
}

// value reads a quoted value and the character after it.
func (p *parser) value() (string, byte, error) {
	q, err := p.char()
	if err != nil {
		return "", 0, err
	}
	if q != '"' && q != '\'' {
		return "", 0, p.errorf("expected a quoted value, got %q", q)
	}
	var b strings.Builder
	for {
		c, err := p.char()
		if err != nil {
			return "", 0, err
		}
		if c == q {
			break
		}
		if b.Len() == maxStrLen {
			return "", 0, p.errorf("value longer than %d bytes", maxStrLen)
		}
		b.WriteByte(c)
	}
	last, err := p.char()
	return b.String(), last, err
}

func (p *parser) skipComment(start string) error {
	// start holds what followed "<!--" in the name token.
	window := "..." + start
	if len(window) > 3 {
		window = window[len(window)-3:]
	}
	for window != "-->" {
		c, err := p.char()
		if err != nil {
			return p.errorf("unterminated comment")
		}
		window = window[1:] + string(c)
	}
	return nil
}

// node reads the next element tag.
func (p *parser) node() (*Node, kind, error) {
	c := byte(' ')
	for c == ' ' || c == '\n' || c == '\r' {
		var err error
		c, err = p.r.ReadByte()
		if errors.Is(err, io.EOF) {
			return nil, kindNone, nil
		}
		if err != nil {
			return nil, kindNone, fmt.Errorf("read: %v: %w", err, hal.ErrSystem)
		}
		p.off++
	}
	if c != '<' {
		return nil, 0, p.errorf("expected '<', got %q", c)
	}
	name, last, err := p.token()
	if err != nil {
		return nil, 0, err
	}
	if strings.HasPrefix(name, "!--") {
		rest := name[3:]
		if last != '>' || !strings.HasSuffix(rest, "--") {
			rest += string(last)
			if err := p.skipComment(rest); err != nil {
				return nil, 0, err
			}
		}
		return p.node()
	}
	if name == "" && last == '/' {
		name, last, err = p.token()
		if err != nil {
			return nil, 0, err
		}
		if last != '>' {
			return nil, 0, p.errorf("unexpected %q in closing tag </%s", last, name)
		}
		return &Node{Name: name}, kindClose, nil
	}
	if name == "" {
		return nil, 0, p.errorf("empty element name")
	}
	if last == '=' {
		return nil, 0, p.errorf("element <%s> has a value", name)
	}
	n := &Node{Name: name}
	for last == ' ' {
		var key, val string
		key, last, err = p.token()
		if err != nil {
			return nil, 0, err
		}
		if last == '=' {
			val, last, err = p.value()
			if err != nil {
				return nil, 0, err
			}
		}
		if key == "" && last != '/' && last != '>' && last != ' ' {
			return nil, 0, p.errorf("attribute without a name in <%s>", name)
		}
		if key != "" {
			if _, dup := n.Get(key); dup {
				return nil, 0, p.errorf("attribute %s repeated in <%s>", key, name)
			}
			n.Attrs = append(n.Attrs, Attr{key, val})
		}
	}
	k := kindOpen
	if last == '/' {
		k = kindSingle
		var rest string
		rest, last, err = p.token()
		if err != nil {
			return nil, 0, err
		}
		if rest != "" {
			return nil, 0, p.errorf("unexpected %q after / in <%s>", rest, name)
		}
	}
	if last != '>' {
		return nil, 0, p.errorf("expected '>' in <%s>, got %q", name, last)
	}
	p.nodes++
	if p.nodes > maxNodes {
		return nil, 0, p.errorf("more than %d elements", maxNodes)
	}
	return n, k, nil
}

// children reads the content of head until its closing tag.
func (p *parser) children(head *Node, k kind, depth int) error {
	if k == kindSingle {
		return nil
	}
	if depth > maxDepth {
		return p.errorf("elements nested deeper than %d", maxDepth)
	}
	for {
		n, nk, err := p.node()
		if err != nil {
			return err
		}
		switch nk {
		case kindNone:
			return p.errorf("unterminated <%s>", head.Name)
		case kindClose:
			if n.Name != head.Name {
				return p.errorf("</%s> closes <%s>", n.Name, head.Name)
			}
			return nil
		}
		if len(head.Subs) == maxSubs {
			return p.errorf("<%s> has more than %d children", head.Name, maxSubs)
		}
		head.Subs = append(head.Subs, n)
		if err := p.children(n, nk, depth+1); err != nil {
			return err
		}
	}
}
