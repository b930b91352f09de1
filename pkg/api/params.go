// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/ethersphere/bee/v2/pkg/jsonhttp"
	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/go-playground/validator/v10"
)

// mapTag names the request parameter a struct field is read from, as bee's
// API does: `map:"name"`, or `map:"name,lower"` to lower-case the value
// before it is validated. Fields without the tag are not mapped.
const mapTag = "map"

// hexBytes is a byte string given in hex, with or without a 0x prefix.
type hexBytes []byte

var hexBytesType = reflect.TypeFor[hexBytes]()

// decodeHex decodes hex with an optional 0x prefix.
func decodeHex(s string) ([]byte, error) {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	b, err := hex.DecodeString(s)
	if err != nil {
		var invalid hex.InvalidByteError
		switch {
		case errors.As(err, &invalid):
			return nil, fmt.Errorf("invalid hex byte: %#U", rune(invalid))
		case errors.Is(err, hex.ErrLength):
			return nil, errors.New("odd length hex string")
		}
		return nil, err
	}
	return b, nil
}

// newValidator is go-playground's validator naming fields by their map tag,
// so that a reason names the parameter the dApp sent.
func newValidator() *validator.Validate {
	v := validator.New()
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get(mapTag), ",")
		return name
	})
	return v
}

// mapParams fills the mapped fields of out, a pointer to a struct, from get
// (a parameter's value and whether it was given at all), then validates out
// by its `validate` tags. Supported field types: string, bool, uint64,
// hexBytes, and pointers to the first three (nil when absent). It returns a
// reason per field that failed, parse failures first.
func (s *Server) mapParams(get func(name string) (string, bool), out any) []jsonhttp.Reason {
	v := reflect.ValueOf(out).Elem()
	t := v.Type()
	var reasons []jsonhttp.Reason
	failed := make(map[string]bool)
	for i := range t.NumField() {
		tag, ok := t.Field(i).Tag.Lookup(mapTag)
		if !ok {
			continue
		}
		name, opt, _ := strings.Cut(tag, ",")
		raw, given := get(name)
		if !given {
			continue
		}
		if opt == "lower" {
			raw = strings.ToLower(raw)
		}
		if err := setParam(v.Field(i), raw); err != nil {
			reasons = append(reasons, jsonhttp.Reason{Field: name, Error: err.Error()})
			failed[name] = true
		}
	}
	err := s.validate.Struct(out)
	var verrs validator.ValidationErrors
	if errors.As(err, &verrs) {
		for _, fe := range verrs {
			if failed[fe.Field()] {
				continue
			}
			msg := "want " + fe.Tag()
			if fe.Param() != "" {
				msg += ":" + fe.Param()
			}
			reasons = append(reasons, jsonhttp.Reason{Field: fe.Field(), Error: msg})
		}
	} else if err != nil {
		reasons = append(reasons, jsonhttp.Reason{Field: "", Error: err.Error()})
	}
	return reasons
}

// setParam parses raw into the field f.
func setParam(f reflect.Value, raw string) error {
	if f.Type() == hexBytesType {
		b, err := decodeHex(raw)
		if err != nil {
			return err
		}
		f.SetBytes(b)
		return nil
	}
	if f.Kind() == reflect.Pointer {
		p := reflect.New(f.Type().Elem())
		if err := setParam(p.Elem(), raw); err != nil {
			return err
		}
		f.Set(p)
		return nil
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(raw)
	case reflect.Bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return errors.New("invalid syntax: want true or false")
		}
		f.SetBool(b)
	case reflect.Uint64:
		n, err := strconv.ParseUint(raw, 10, 64)
		if err != nil {
			var ne *strconv.NumError
			if errors.As(err, &ne) {
				err = ne.Err
			}
			return err
		}
		f.SetUint(n)
	default:
		panic(fmt.Sprintf("api: unsupported parameter type %s", f.Type()))
	}
	return nil
}

// queryGetter reads the first value of a query parameter.
func queryGetter(r *http.Request) func(string) (string, bool) {
	q := r.URL.Query()
	return func(name string) (string, bool) {
		vs, ok := q[name]
		if !ok || len(vs) == 0 {
			return "", false
		}
		return vs[0], true
	}
}

// mapNames are the parameter names of the mapped fields of the struct
// types of vs.
func mapNames(vs ...any) []string {
	var out []string
	for _, v := range vs {
		t := reflect.TypeOf(v)
		for i := range t.NumField() {
			if tag, ok := t.Field(i).Tag.Lookup(mapTag); ok {
				name, _, _ := strings.Cut(tag, ",")
				out = append(out, name)
			}
		}
	}
	return out
}

// checkQuery refuses what a route would otherwise ignore: a query
// parameter it does not read (a typo, or a header's name misspelt, would
// silently change nothing), and one given twice with different values.
// known are the route's parameter structs.
func checkQuery(r *http.Request, known ...any) []jsonhttp.Reason {
	names := mapNames(known...)
	var reasons []jsonhttp.Reason
	q := r.URL.Query()
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		vs := q[k]
		switch {
		case !slices.Contains(names, k):
			reasons = append(reasons, jsonhttp.Reason{Field: k, Error: "unknown parameter: this route reads " + strings.Join(names, ", ")})
		case len(vs) > 1 && slices.ContainsFunc(vs[1:], func(v string) bool { return v != vs[0] }):
			reasons = append(reasons, jsonhttp.Reason{Field: k, Error: fmt.Sprintf("given %d times with different values", len(vs))})
		}
	}
	return reasons
}

// headerOrQuery reads a parameter a header carries from the header or,
// since a browser's WebSocket sends no headers, from the query parameter
// of the same name. Given both ways with different values, it reports a
// conflict for the parameter instead (values compared case-insensitively:
// hex).
func headerOrQuery(r *http.Request, reasons *[]jsonhttp.Reason) func(string) (string, bool) {
	q := r.URL.Query()
	return func(name string) (string, bool) {
		hv, hok := "", false
		if vs := r.Header.Values(name); len(vs) > 0 {
			hv, hok = vs[0], true
		}
		qv, qok := "", false
		if vs := q[name]; len(vs) > 0 {
			qv, qok = vs[0], true
		}
		switch {
		case hok && qok && !strings.EqualFold(hv, qv):
			*reasons = append(*reasons, jsonhttp.Reason{Field: name, Error: fmt.Sprintf("given as header (%q) and as query parameter (%q) with different values", hv, qv)})
			return "", false
		case hok:
			return hv, true
		}
		return qv, qok
	}
}

// badRequest answers 400 in bee's format: a message and a reason per field.
func badRequest(w http.ResponseWriter, logger log.Logger, msg string, reasons ...jsonhttp.Reason) {
	logger.Debug(msg, "reasons", reasons)
	jsonhttp.BadRequest(w, jsonhttp.StatusResponse{
		Code:    http.StatusBadRequest,
		Message: msg,
		Reasons: reasons,
	})
}
