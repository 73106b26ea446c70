{{/*
Names and labels shared by the templates. Object names and labels are those of
manifests/install.yaml: no helm.sh/chart or app.kubernetes.io/instance labels,
so that the default render equals install.yaml object for object (Helm stamps its
own meta.helm.sh/release-* annotations and managed-by label on the live objects).
*/}}

{{/*
The names' prefix: the release name if it ends with "bootc-operator" (and is at
most 44 characters: "<fullname>-controller-metrics" is a Service name, at most
63), else "<release, cut to 29>-bootc-operator". It always ends with
"bootc-operator": the alerting rules and the dashboard find the metrics jobs
(the Service names) by "bootc-operator-controller" and "bootc-operator-daemon".
*/}}
{{- define "bootc-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride -}}
{{- else if and (hasSuffix .Chart.Name .Release.Name) (le (len .Release.Name) 44) -}}
{{- .Release.Name -}}
{{- else -}}
{{- printf "%s-%s" (.Release.Name | trunc 29 | trimSuffix "-") .Chart.Name -}}
{{- end -}}
{{- end -}}

{{- define "bootc-operator.controller" -}}
{{ include "bootc-operator.fullname" . }}-controller
{{- end -}}

{{- define "bootc-operator.daemon" -}}
{{ include "bootc-operator.fullname" . }}-daemon
{{- end -}}

{{/* The leader-election Lease (--leader-election-id); its Role names it. */}}
{{- define "bootc-operator.leaseName" -}}
{{ include "bootc-operator.controller" . }}
{{- end -}}

{{/* metadata.labels of every object; pass (dict "ctx" $ "component" "controller"). */}}
{{- define "bootc-operator.labels" -}}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
app.kubernetes.io/name: bootc-operator
app.kubernetes.io/part-of: bootc-operator
{{- end -}}

{{/* The selector (and Pod labels) of a component. */}}
{{- define "bootc-operator.selector" -}}
app.kubernetes.io/component: {{ . }}
app.kubernetes.io/name: bootc-operator
{{- end -}}

{{/* repository[:tag][@digest]; tag defaults to the chart's appVersion. */}}
{{- define "bootc-operator.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- .Values.image.repository -}}
{{- if $tag }}:{{ $tag }}{{ end -}}
{{- if .Values.image.digest }}@{{ .Values.image.digest }}{{ end -}}
{{- end -}}

{{/* Refuses a release namespace the chart must not own. */}}
{{- define "bootc-operator.checkNamespace" -}}
{{- if and .Values.namespace.create (has .Release.Namespace (list "default" "kube-system" "kube-public" "kube-node-lease")) -}}
{{- fail (printf "namespace.create=true would make this release own the namespace %q: install with --namespace NAME (e.g. bootc-operator), or set namespace.create=false" .Release.Namespace) -}}
{{- end -}}
{{- end -}}

{{/* Refuses values that make no working controller. */}}
{{- define "bootc-operator.checkController" -}}
{{- if and (not .Values.controller.leaderElection.enabled) (gt (int .Values.controller.replicas) 1) -}}
{{- fail (printf "controller.replicas=%d without leader election would run %d controllers at once: set controller.replicas=1 or controller.leaderElection.enabled=true" (int .Values.controller.replicas) (int .Values.controller.replicas)) -}}
{{- end -}}
{{- end -}}
