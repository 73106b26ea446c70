// argocd-health prints Argo CD's health verdict for Kubernetes objects, computed by
// Argo CD's own code (github.com/argoproj/argo-cd/v3, from the Go module proxy) the
// way an Argo CD application controller does it: the resource customizations are
// read from an argocd-cm ConfigMap by Argo CD's settings manager (so the keys
// resource.customizations.health.<group>_<kind> are parsed as Argo CD parses them),
// and each object's health Lua runs in Argo CD's gopher-lua sandbox
// (util/lua.ResourceHealthOverrides.GetResourceHealth: the `obj` global, the
// libraries a ConfigMap script gets, the 1 s limit, the check of hs.status).
//
// Usage: argocd-health ARGOCD-CM.yaml < objects
//
// Input: JSON objects on stdin, one after another (a `kind: List` counts as its
// items). Output: one JSON line per object:
//
//	{"kind": "...", "name": "...", "status": "Progressing", "message": "..."}
//
// with "status" empty when no health check applies to the object, or "error" when the
// script fails. The exit code is 0 unless the ConfigMap or the input cannot be read.
//
// Build: hack/build-argocd-health.sh (cached under ~/.cache/bootc-operator, keyed by
// the Argo CD version and these sources).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/argoproj/argo-cd/v3/common"
	"github.com/argoproj/argo-cd/v3/util/lua"
	"github.com/argoproj/argo-cd/v3/util/settings"
	log "github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"bootc-operator.local/goobjects"
)

const namespace = "argocd"

type verdict struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
}

// overrides reads the resource customizations of the ConfigMap in path as Argo CD's
// settings manager does, from a cluster holding only that ConfigMap.
func overrides(path string) (lua.ResourceHealthOverrides, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(data, &cm); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if cm.Name != common.ArgoCDConfigMapName {
		return nil, fmt.Errorf("%s: the ConfigMap is %q, Argo CD reads %q", path, cm.Name, common.ArgoCDConfigMapName)
	}
	cm.Namespace = namespace
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels["app.kubernetes.io/part-of"] = "argocd"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name:      common.ArgoCDSecretName,
		Namespace: namespace,
		Labels:    map[string]string{"app.kubernetes.io/part-of": "argocd"},
	}}
	mgr := settings.NewSettingsManager(context.Background(), fake.NewClientset(&cm, secret), namespace)
	found, err := mgr.GetResourceOverrides()
	if err != nil {
		return nil, err
	}
	return lua.ResourceHealthOverrides(found), nil
}

func main() {
	log.SetOutput(io.Discard) // the settings manager's informational lines
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: argocd-health ARGOCD-CM.yaml < objects")
		os.Exit(2)
	}
	health, err := overrides(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "argocd-health:", err)
		os.Exit(2)
	}
	objs, err := goobjects.Read(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "argocd-health: reading the input:", err)
		os.Exit(2)
	}
	enc := json.NewEncoder(os.Stdout)
	for _, u := range objs {
		v := verdict{Kind: u.GetKind(), Name: u.GetName()}
		hs, err := health.GetResourceHealth(u)
		switch {
		case err != nil:
			v.Error = err.Error()
		case hs != nil:
			v.Status, v.Message = string(hs.Status), hs.Message
		}
		if err := enc.Encode(v); err != nil {
			fmt.Fprintln(os.Stderr, "argocd-health:", err)
			os.Exit(2)
		}
	}
}
