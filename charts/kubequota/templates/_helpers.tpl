{{/* Chart name, cut to 63 characters (a DNS label). */}}
{{- define "kubequota.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Prefix of every object name: the release name, plus the chart name unless included. */}}
{{- define "kubequota.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kubequota.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels that select the pods (never change them on upgrade: selectors are immutable). */}}
{{- define "kubequota.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubequota.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "kubequota.labels" -}}
helm.sh/chart: {{ include "kubequota.chart" . }}
{{ include "kubequota.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "kubequota.serviceAccountName" -}}
{{- default (include "kubequota.fullname" .) .Values.serviceAccount.name }}
{{- end }}

{{/* The Service's in-cluster DNS name: the webhooks' target and the extender's serverName. */}}
{{- define "kubequota.serviceHost" -}}
{{- printf "%s.%s.svc" (include "kubequota.fullname" .) .Release.Namespace }}
{{- end }}

{{- define "kubequota.queuesConfigMap" -}}
{{- printf "%s-queues" (include "kubequota.fullname" .) }}
{{- end }}

{{- define "kubequota.schedulerConfigMap" -}}
{{- printf "%s-scheduler" (include "kubequota.fullname" .) }}
{{- end }}

{{- define "kubequota.leaseName" -}}
{{- default .Values.schedulerName .Values.scheduler.leaseName }}
{{- end }}

{{/* kubequota's own leader election: asked for, or forced by more than one replica (two
acting leaders would both evict, write ElasticQuota status and charge). "true" or "". */}}
{{- define "kubequota.leaderElect" -}}
{{- if or .Values.kubequota.leaderElection.enabled (gt (int .Values.replicaCount) 1) }}true{{ end }}
{{- end }}

{{- define "kubequota.gatingUsageConfigMap" -}}
{{- default (printf "%s-gating-usage" (include "kubequota.fullname" .)) .Values.kubequota.admissionGate.usageConfigMap }}
{{- end }}

{{- define "kubequota.kqLeaseName" -}}
{{- default (include "kubequota.fullname" .) .Values.kubequota.leaderElection.leaseName }}
{{- end }}

{{/* TLS source: certManager | existingSecret | helm. */}}
{{- define "kubequota.tlsMode" -}}
{{- if and .Values.tls.certManager.enabled .Values.tls.existingSecret }}
{{- fail "tls: set either tls.certManager.enabled or tls.existingSecret, not both" }}
{{- else if .Values.tls.certManager.enabled }}certManager
{{- else if .Values.tls.existingSecret }}existingSecret
{{- else }}helm
{{- end }}
{{- end }}

{{/* Secret holding kubequota's serving certificate (tls.crt, tls.key, ca.crt). */}}
{{- define "kubequota.tlsSecret" -}}
{{- if .Values.tls.existingSecret }}{{ .Values.tls.existingSecret }}
{{- else }}{{ printf "%s-tls" (include "kubequota.fullname" .) }}
{{- end }}
{{- end }}

{{/* Secret holding the scheduler's client certificate (tls.clientAuth.enabled). */}}
{{- define "kubequota.clientSecret" -}}
{{- if .Values.tls.clientAuth.existingSecret }}{{ .Values.tls.clientAuth.existingSecret }}
{{- else }}{{ printf "%s-client-tls" (include "kubequota.fullname" .) }}
{{- end }}
{{- end }}

{{/* DNS names of the serving certificate. */}}
{{- define "kubequota.dnsNames" -}}
{{- $fn := include "kubequota.fullname" . }}
{{- $names := list $fn (printf "%s.%s" $fn .Release.Namespace) (include "kubequota.serviceHost" .) (printf "%s.cluster.local" (include "kubequota.serviceHost" .)) "localhost" }}
{{- concat $names .Values.tls.extraDnsNames | toJson }}
{{- end }}

{{/* No image of kubequota is published: the repository must name the one you built and
pushed (README.md, "Install"), so a forgotten value fails the install instead of leaving
pods in ImagePullBackOff. */}}
{{- define "kubequota.image" -}}
{{- $repo := required "kubequota.image.repository is required: build the image (make image IMAGE=REGISTRY/kubequota:TAG), push it, and pass --set kubequota.image.repository=REGISTRY/kubequota (README.md, Install)" .Values.kubequota.image.repository }}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.kubequota.image.tag) }}
{{- end }}

{{/* kube-scheduler image; the default tag is the cluster's version without vendor suffixes. */}}
{{- define "kubequota.schedulerImage" -}}
{{- $tag := .Values.scheduler.image.tag }}
{{- if not $tag }}
{{- $tag = regexFind "^v[0-9]+\\.[0-9]+\\.[0-9]+" .Capabilities.KubeVersion.Version }}
{{- end }}
{{- printf "%s:%s" .Values.scheduler.image.repository $tag }}
{{- end }}

{{/* Namespaces every webhook leaves alone. */}}
{{- define "kubequota.excludedNamespaces" -}}
{{- concat (list "kube-system" "kube-public" "kube-node-lease" .Release.Namespace) .Values.webhooks.excludeNamespaces | uniq | toJson }}
{{- end }}

{{/* Mount points inside the pod. */}}
{{- define "kubequota.configDir" -}}/etc/kubequota/config{{- end }}
{{- define "kubequota.tlsDir" -}}/etc/kubequota/tls{{- end }}
{{- define "kubequota.caDir" -}}/etc/kubequota/ca{{- end }}
{{- define "kubequota.clientDir" -}}/etc/kubequota/client{{- end }}
{{- define "kubequota.schedulerConfigDir" -}}/etc/kubernetes/kubequota{{- end }}
{{- define "kubequota.restTokenDir" -}}/etc/kubequota/rest-token{{- end }}
{{- define "kubequota.meteringDir" -}}/var/lib/kubequota{{- end }}
{{- define "kubequota.meteringClaim" -}}
{{- default (printf "%s-metering" (include "kubequota.fullname" .)) .Values.metering.persistence.existingClaim }}
{{- end }}

{{/* webhooks.filtering as one CEL expression over request.namespace: processed (any
processNamespaces expression matches, or there is none) and not bypassed (no
bypassNamespaces expression matches). The same expressions kubequota evaluates with POSIX
regcomp (--process-namespaces, --bypass-namespaces), here with CEL's RE2 `matches`, which
is unanchored too; both must agree to govern a namespace, so write expressions the two
read alike (^ $ . [...] * + ? | ( ) {n,m}). Each becomes a CEL string literal. */}}
{{- define "kubequota.namespaceFilterCEL" -}}
{{- $match := dict }}
{{- range $key, $val := dict "process" .Values.webhooks.filtering.processNamespaces "bypass" .Values.webhooks.filtering.bypassNamespaces }}
{{- $out := list }}
{{- range splitList "," ($val | default "") }}
{{- $re := trim . }}
{{- if $re }}
{{- $out = append $out (printf "request.namespace.matches('%s')" ($re | replace "\\" "\\\\" | replace "'" "\\'")) }}
{{- end }}
{{- end }}
{{- $_ := set $match $key $out }}
{{- end }}
{{- $processed := "true" }}
{{- with $match.process }}{{ $processed = printf "(%s)" (join " || " .) }}{{ end }}
{{- $bypassed := "false" }}
{{- with $match.bypass }}{{ $bypassed = printf "(%s)" (join " || " .) }}{{ end }}
{{- printf "%s && !%s" $processed $bypassed }}
{{- end }}
