package providers

import (
	"bytes"
	"fmt"

	"github.com/tidwall/gjson"
)

// ArrayItems is a Splitter's work for a batch sent as a JSON array of
// events: one Item per element of list (an array read from body with
// gjson), each an object whose bytes are located in body — a sub-slice,
// never re-serialised; gjson's offset is checked, not trusted — and
// resolved by resolve. name is the array's path in errors ("events" gives
// "events[3]"). A non-object element, one that cannot be located, one
// resolve refuses, or an empty array refuses the whole delivery.
func ArrayItems(body []byte, list gjson.Result, name string, resolve func(gjson.Result) (Event, error)) ([]Item, error) {
	var out []Item
	var err error
	list.ForEach(func(_, el gjson.Result) bool {
		at := fmt.Sprintf("%s[%d]", name, len(out))
		if !el.IsObject() {
			err = fmt.Errorf("%w: %s is not an object", ErrMalformed, at)
			return false
		}
		end := el.Index + len(el.Raw)
		if el.Index <= 0 || end > len(body) || !bytes.Equal(body[el.Index:end], []byte(el.Raw)) {
			err = fmt.Errorf("%w: cannot locate %s in the body", ErrMalformed, at)
			return false
		}
		ev, rerr := resolve(el)
		if rerr != nil {
			err = fmt.Errorf("%s: %w", at, rerr)
			return false
		}
		out = append(out, Item{Body: body[el.Index:end], Offset: el.Index, Event: ev})
		return true
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s is empty", ErrMalformed, name)
	}
	return out, nil
}
