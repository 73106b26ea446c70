# Entry points; each target is a thin wrapper over a hack/ script.
.PHONY: test unit setup binaries crds krew controlplane-up controlplane-down bench demo image deploy

# The operator's image: `make image` builds it, `make deploy` renders install.yaml with it.
IMG ?= localhost/bootc-operator:dev

demo:            ## the README's demo: 6 simulated bootc nodes, a rollout shown live (DEMO_ARGS=--keep; DEMO_ARGS="--scenario bad-image": a canary fails its health check and is rolled back)
	bash hack/demo $(DEMO_ARGS)

test:            ## lint, type-check, unit + e2e (the README's test command)
	bash hack/test.sh

unit:            ## unit tier only (no control plane)
	bash hack/setup.sh && .venv/bin/pytest unit

setup:           ## create .venv with the package and its test tools
	bash hack/setup.sh

binaries:        ## build and cache kube-apiserver, kube-controller-manager, etcd, kwok ..., helm and cosign
	bash hack/build-binaries.sh && bash hack/build-helm.sh && bash hack/build-cosign.sh

crds:            ## regenerate manifests/crd from the models (and what embeds them)
	bash hack/gen-crds

krew:            ## a release's krew plugin: archive + rendered manifest of this version into .cache/krew
	bash hack/krew-archive

bench:           ## scale/performance figures (N=100/1000/5000 + 20 daemons; ARGS=--quick for N=100)
	bash hack/bench $(ARGS)

image:           ## build the image from Containerfile (podman/buildah; IMG=..., PYTHON_IMAGE=... else a base made from Debian packages)
	IMG=$(IMG) bash hack/build-image.sh

deploy:          ## print install.yaml with the image IMG (kustomize image override): make -s deploy IMG=registry/name:tag | kubectl apply -f -
	@bash hack/gen-install --image $(IMG)
