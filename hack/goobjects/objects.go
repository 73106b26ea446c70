// Package goobjects reads Kubernetes objects as JSON for the repository's Go test tools
// (hack/kstatus, hack/argocd-health): one value after another on a stream, a `kind:
// List` standing for its items, decoded as the API machinery decodes them (whole
// numbers as int64, which kstatus and Argo CD read generations as).
package goobjects

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Read decodes every JSON object of r, in order.
func Read(r io.Reader) ([]*unstructured.Unstructured, error) {
	dec := json.NewDecoder(bufio.NewReader(r))
	var out []*unstructured.Unstructured
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		obj, _, err := unstructured.UnstructuredJSONScheme.Decode(raw, nil, nil)
		if err != nil {
			return nil, err
		}
		switch o := obj.(type) {
		case *unstructured.UnstructuredList:
			for i := range o.Items {
				out = append(out, &o.Items[i])
			}
		case *unstructured.Unstructured:
			out = append(out, o)
		default:
			return nil, fmt.Errorf("not an object: %T", obj)
		}
	}
}
