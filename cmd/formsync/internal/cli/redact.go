package cli

import (
	"context"
	"log/slog"

	"github.com/formsync/formsync/worker/formsapi"
)

// redactingHandler is the log's last line of defence: every message and
// every string, error or stringer attribute is passed through the token's
// Redactor before it is written, whatever produced it. The API client
// already cleans the server text it quotes; this covers anything else.
type redactingHandler struct {
	inner slog.Handler
	r     *formsapi.Redactor
}

func (h *redactingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *redactingHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.Redact(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.inner.Handle(ctx, out)
}

func (h *redactingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(as))
	for i, a := range as {
		clean[i] = h.attr(a)
	}
	return &redactingHandler{inner: h.inner.WithAttrs(clean), r: h.r}
}

func (h *redactingHandler) WithGroup(name string) slog.Handler {
	return &redactingHandler{inner: h.inner.WithGroup(name), r: h.r}
}

func (h *redactingHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.Redact(v.String()))
	case slog.KindGroup:
		g := v.Group()
		clean := make([]any, len(g))
		for i, ga := range g {
			clean[i] = h.attr(ga)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, h.r.Redact(x.Error()))
		case interface{ String() string }:
			return slog.String(a.Key, h.r.Redact(x.String()))
		case []string:
			clean := make([]string, len(x))
			for i, s := range x {
				clean[i] = h.r.Redact(s)
			}
			return slog.Any(a.Key, clean)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
