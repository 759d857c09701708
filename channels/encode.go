package channels

import (
	"encoding/json"
	"io"
)

func encodeJSON(v any) ([]byte, error) { return json.Marshal(v) }

func decodeJSON(r io.Reader, v any) error {
	d := json.NewDecoder(r)
	d.DisallowUnknownFields()
	return d.Decode(v)
}
