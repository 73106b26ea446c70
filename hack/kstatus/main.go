// kstatus prints kstatus's verdict for Kubernetes objects: what Flux (its
// kustomize-controller's health checks, `flux get`, `wait: true`) and other tools
// built on sigs.k8s.io/cli-utils compute from an object's status, with the published
// module's own code (pkg/kstatus/status.Compute), not a copy of its rules.
//
// Input: JSON objects on stdin, one after another (a `kind: List` counts as its
// items), or the files named as arguments. Output: one JSON line per object:
//
//	{"kind": "...", "name": "...", "status": "InProgress", "message": "..."}
//
// or {"kind", "name", "error"} when kstatus cannot compute a verdict. The exit code
// is 0 unless the input is not JSON objects.
//
// Build: hack/build-kstatus.sh (cached under ~/.cache/bootc-operator, keyed by the
// cli-utils version and these sources).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"bootc-operator.local/goobjects"
)

type verdict struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
}

func compute(u *unstructured.Unstructured) verdict {
	v := verdict{Kind: u.GetKind(), Name: u.GetName()}
	res, err := status.Compute(u)
	if err != nil {
		v.Error = err.Error()
		return v
	}
	v.Status = res.Status.String()
	v.Message = res.Message
	return v
}

func main() {
	var inputs []io.Reader
	for _, path := range os.Args[1:] {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kstatus:", err)
			os.Exit(2)
		}
		defer f.Close()
		inputs = append(inputs, f)
	}
	if len(inputs) == 0 {
		inputs = append(inputs, os.Stdin)
	}
	enc := json.NewEncoder(os.Stdout)
	for _, in := range inputs {
		objs, err := goobjects.Read(in)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kstatus: reading the input:", err)
			os.Exit(2)
		}
		for _, u := range objs {
			if err := enc.Encode(compute(u)); err != nil {
				fmt.Fprintln(os.Stderr, "kstatus:", err)
				os.Exit(2)
			}
		}
	}
}
