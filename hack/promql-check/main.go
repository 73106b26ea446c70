// promql-check parses PromQL expressions with Prometheus' own parser
// (github.com/prometheus/prometheus/promql/parser) for the tests of the
// Prometheus kit (unit/test_prometheus_kit.py).
//
// Input: one JSON string (an expression) per line on stdin.
// Output: one JSON object per input line on stdout:
//
//	{"error": "..."}                                  the expression does not parse
//	{"selectors": [{"metric": "...", "matchers": [{"name", "type", "value"}]}],
//	 "groupings": [["label", ...], ...]}              what it selects and groups by
//
// Build: hack/build-promql-check.sh (cached under ~/.cache/bootc-operator).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/prometheus/prometheus/promql/parser"
)

type matcher struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Value string `json:"value"`
}

type selector struct {
	Metric   string    `json:"metric"`
	Matchers []matcher `json:"matchers"`
}

type result struct {
	Error     string     `json:"error,omitempty"`
	Selectors []selector `json:"selectors,omitempty"`
	Groupings [][]string `json:"groupings,omitempty"`
}

func check(p parser.Parser, expr string) result {
	node, err := p.ParseExpr(expr)
	if err != nil {
		return result{Error: err.Error()}
	}
	res := result{Selectors: []selector{}, Groupings: [][]string{}}
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			sel := selector{Metric: n.Name, Matchers: []matcher{}}
			for _, m := range n.LabelMatchers {
				if m.Name == "__name__" {
					continue
				}
				sel.Matchers = append(sel.Matchers, matcher{m.Name, m.Type.String(), m.Value})
			}
			res.Selectors = append(res.Selectors, sel)
		case *parser.AggregateExpr:
			if !n.Without && len(n.Grouping) > 0 {
				res.Groupings = append(res.Groupings, append([]string{}, n.Grouping...))
			}
		}
		return nil
	})
	return res
}

func main() {
	p := parser.NewParser(parser.Options{})
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		var expr string
		if err := json.Unmarshal(in.Bytes(), &expr); err != nil {
			fmt.Fprintln(os.Stderr, "promql-check: each input line must be a JSON string:", err)
			os.Exit(2)
		}
		line, err := json.Marshal(check(p, expr))
		if err != nil {
			fmt.Fprintln(os.Stderr, "promql-check:", err)
			os.Exit(1)
		}
		fmt.Fprintln(out, string(line))
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "promql-check:", err)
		os.Exit(1)
	}
}
