package odatasim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

var decimalText = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)

// SetStock sets the balance of item in warehouse (Ref_Keys) to qty, a decimal
// ("12", "0.5"); 0 takes it off the register's Balance. It panics on a qty that
// is not a decimal (a mistake in a test).
func (s *Server) SetStock(warehouseRef, itemRef, qty string) {
	if !decimalText.MatchString(qty) {
		panic(fmt.Sprintf("odatasim: stock %q is not a decimal", qty))
	}
	if strings.Contains(qty, ".") {
		qty = strings.TrimRight(strings.TrimRight(qty, "0"), ".")
	}
	zero := toRat(qty).Sign() == 0
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.stock, func(d Doc) bool {
		return d["Склад_Key"] == warehouseRef && d["Номенклатура_Key"] == itemRef
	})
	switch {
	case i >= 0 && zero:
		s.stock = slices.Delete(s.stock, i, i+1)
	case i >= 0:
		s.stock[i][StockBalance] = json.Number(qty)
	case !zero:
		s.stock = append(s.stock, Doc{"Номенклатура_Key": itemRef, "Склад_Key": warehouseRef, StockBalance: json.Number(qty)})
	}
}

// balance answers the register's virtual table Balance(…).
func (s *Server) balance(c *request, key, action string) {
	name, params, parens := strings.Cut(action, "(")
	switch {
	case key != "" || name == "":
		c.fail(&apiError{http.StatusBadRequest, 0, "Возможность не поддерживается симулятором: записи регистра " + s.prof.register})
		return
	case name != "Balance":
		c.fail(&apiError{http.StatusBadRequest, 6, "Метод не найден: " + name})
		return
	case c.r.Method != http.MethodGet:
		c.fail(&apiError{http.StatusBadRequest, 19, "Использованный HTTP-метод запрещен в данном контексте"})
		return
	}
	if parens {
		var ok bool
		if params, ok = strings.CutSuffix(params, ")"); !ok {
			c.fail(&apiError{http.StatusBadRequest, 6, "Неверный URL: " + action})
			return
		}
	}
	args, e := parseParams(params)
	if e != nil {
		c.fail(e)
		return
	}
	for _, p := range []string{"Condition", "Period", "Dimensions"} {
		if v, ok := c.q[p]; ok && args[p] == "" {
			args[p] = v
		}
	}
	dims := stockFields[:2]
	conds, e := parseFilter(args["Condition"], func(n string) string { return typeIn(dims, n) })
	if e != nil {
		c.fail(e)
		return
	}
	sh := shape{fields: stockFields}
	l, e := parseListing(c.q, sh)
	if e != nil {
		c.fail(e)
		return
	}
	if s.fault(c, "stock", "") {
		return
	}
	s.mu.Lock()
	l.filter = append(conds, l.filter...)
	page, n := l.apply(s.stock, sh)
	s.mu.Unlock()
	c.list(s.prof.register+"_Balance", page, n, l.count)
}

// parseParams reads a virtual table's parameters, Name=literal comma separated:
// Condition='…' (its quotes doubled, as OData writes a quote in a string, or not,
// as 1C's manual prints its examples), Period=datetime'…', Dimensions='…'. It
// answers each as text: the condition unquoted, the period's date.
func parseParams(p string) (map[string]string, *apiError) {
	args := map[string]string{}
	l := &lexer{s: strings.TrimSpace(p)}
	for !l.done() {
		name := l.word()
		l.space()
		if !l.eat("=") {
			return lenientCondition(p)
		}
		l.space()
		lit, err := l.literal()
		if err != nil {
			return lenientCondition(p)
		}
		switch {
		case (name == "Condition" || name == "Dimensions") && lit.edm == edmString,
			name == "Period" && lit.edm == edmDateTime:
			args[name] = lit.v.(string)
		default:
			return nil, &apiError{http.StatusBadRequest, 21, "Неверный аргумент функции Balance: " + name}
		}
		l.space()
		if !l.done() && !l.eat(",") {
			return lenientCondition(p)
		}
		l.space()
	}
	return args, nil
}

// lenientCondition reads Condition='…' whose inner quotes are not doubled, as
// the manual's examples write it: everything between the first quote and the last.
func lenientCondition(p string) (map[string]string, *apiError) {
	inner, ok := strings.CutPrefix(strings.TrimSpace(p), "Condition='")
	if inner, ok2 := strings.CutSuffix(inner, "'"); ok && ok2 {
		return map[string]string{"Condition": strings.ReplaceAll(inner, "''", "'")}, nil
	}
	return nil, badOption("параметры функции Balance: %q", p)
}
