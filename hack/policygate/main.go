// Command policygate is the real-bootc host's `skopeo` (hack/realbootc): Debian 12's
// skopeo 1.9.3 with the containers policy check that skopeo's image proxy gained in
// 1.13 (containers/skopeo#2029) put in front of it.
//
// bootc pulls images through `skopeo experimental-image-proxy` (ostree-ext, via the
// containers-image-proxy crate): a JSON request/reply protocol over a SOCK_SEQPACKET
// socket on the proxy's stdin, payloads in pipes passed as file descriptors. A newer
// skopeo evaluates /etc/containers/policy.json (containers-policy.json(5)) when it opens
// an image, so a `reject` or an unmet `sigstoreSigned` requirement refuses the pull;
// Debian's 1.9.3 evaluates nothing. This program sits between bootc and Debian's skopeo:
//
//   - any other skopeo command is Debian's skopeo, exec'd with the same arguments;
//   - `experimental-image-proxy`: Debian's skopeo runs as a child on a socket pair of
//     our own; every request and reply (with its file descriptors) is passed along
//     unchanged, one at a time, as the client sends them. When Debian's skopeo has
//     opened an image (OpenImage, OpenImageOptional), the image is checked against the
//     host's policy with containers/image's own policy engine (signature.PolicyContext
//     .IsRunningImageAllowed, as skopeo's proxy does since 1.13; for a manifest list,
//     the top level or the instance for this platform must be allowed, as since
//     containers/skopeo#2400). A refusal closes the image in Debian's skopeo and
//     answers the client with containers/image's error, as skopeo would. The policy is
//     loaded when the client initializes (a missing or invalid policy.json fails
//     Initialize, as in skopeo); `--insecure-policy` turns the check off.
//
// The options are skopeo's (the proxy's image options, and the global --policy and
// --insecure-policy) and are also given to Debian's skopeo as they are. Sigstore
// signatures are found as containers/image finds them: registries.d's
// `use-sigstore-attachments`. POLICYGATE_SKOPEO names the skopeo to run (default
// /usr/bin/skopeo). Transports: those of containers/image's alltransports, less
// containers-storage and docker-daemon (stubbed: refused, since their policy cannot be
// evaluated here).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"go.podman.io/image/v5/image"
	"go.podman.io/image/v5/manifest"
	"go.podman.io/image/v5/signature"
	"go.podman.io/image/v5/transports/alltransports"
	"go.podman.io/image/v5/types"
)

const (
	proxyCommand = "experimental-image-proxy"
	// maxMsgSize is the protocol's largest message (skopeo's and the client's limit).
	maxMsgSize = 32 * 1024
	// maxFds is the most descriptors one message carries (the protocol passes two).
	maxFds = 4
)

// options are the skopeo options the policy check needs; the rest are only passed on.
type options struct {
	sockfd         int
	authfile       string
	certDir        string
	noCreds        bool
	tlsVerify      types.OptionalBool
	policyPath     string
	insecurePolicy bool
}

// flagsWithValue are skopeo's options that take a separate value.
var flagsWithValue = map[string]bool{
	"--authfile": true, "--cert-dir": true, "--creds": true, "--registry-token": true,
	"--decryption-key": true, "--user-agent-prefix": true, "--policy": true,
	"--registries.d": true, "--override-arch": true, "--override-os": true,
	"--override-variant": true, "--command-timeout": true, "--tmpdir": true,
	"--sockfd": true, "--username": true, "--password": true, "--shared-blob-dir": true,
}

// parseArgs finds the subcommand (the first word that is not an option or an option's
// value) and the options the policy check needs.
func parseArgs(args []string) (string, options, error) {
	o := options{}
	sub := ""
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if !strings.HasPrefix(arg, "-") {
			if sub == "" {
				sub = arg
			}
			continue
		}
		name, value, hasValue := strings.Cut(arg, "=")
		if flagsWithValue[name] && !hasValue {
			if i+1 >= len(args) {
				return sub, o, fmt.Errorf("option %s needs a value", name)
			}
			i++
			value = args[i]
		}
		switch name {
		case "--sockfd":
			fd, err := strconv.Atoi(value)
			if err != nil {
				return sub, o, fmt.Errorf("invalid --sockfd %q", value)
			}
			o.sockfd = fd
		case "--authfile":
			o.authfile = value
		case "--cert-dir":
			o.certDir = value
		case "--no-creds":
			o.noCreds = !hasValue || value == "true"
		case "--tls-verify":
			verify := !hasValue || value == "true"
			o.tlsVerify = types.NewOptionalBool(!verify)
		case "--policy":
			o.policyPath = value
		case "--insecure-policy":
			o.insecurePolicy = !hasValue || value == "true"
		}
	}
	return sub, o, nil
}

func (o options) systemContext() *types.SystemContext {
	sys := &types.SystemContext{
		AuthFilePath:                o.authfile,
		DockerCertPath:              o.certDir,
		OCICertPath:                 o.certDir,
		DockerInsecureSkipTLSVerify: o.tlsVerify,
		SignaturePolicyPath:         o.policyPath,
		DockerRegistryUserAgent:     "policygate (bootc-operator's real-bootc host)",
	}
	if o.noCreds {
		sys.DockerAuthConfig = &types.DockerAuthConfig{}
	}
	return sys
}

// gate decides whether the host's policy allows an image.
type gate struct {
	sys    *types.SystemContext
	policy *signature.PolicyContext
}

func newGate(o options) (*gate, error) {
	sys := o.systemContext()
	var policy *signature.Policy
	var err error
	if o.insecurePolicy {
		policy = &signature.Policy{Default: []signature.PolicyRequirement{signature.NewPRInsecureAcceptAnything()}}
	} else {
		policy, err = signature.DefaultPolicy(sys)
		if err != nil {
			return nil, fmt.Errorf("Error loading trust policy: %w", err)
		}
	}
	ctx, err := signature.NewPolicyContext(policy)
	if err != nil {
		return nil, fmt.Errorf("Error loading trust policy: %w", err)
	}
	return &gate{sys: sys, policy: ctx}, nil
}

// check returns nil when the policy allows the image named (TRANSPORT:REF), else why not.
func (g *gate) check(name string) error {
	ctx := context.Background()
	ref, err := alltransports.ParseImageName(name)
	if err != nil {
		return err
	}
	src, err := ref.NewImageSource(ctx, g.sys)
	if err != nil {
		return err
	}
	defer src.Close()
	top := image.UnparsedInstance(src, nil)
	allowed, topErr := g.policy.IsRunningImageAllowed(ctx, top)
	if topErr == nil && allowed {
		return nil
	}
	if topErr == nil {
		topErr = errors.New("internal inconsistency: policy verification failed without returning an error")
	}
	// a manifest list passes when the instance this platform would pull does
	blob, mime, err := top.Manifest(ctx)
	if err != nil || !manifest.MIMETypeIsMultiImage(mime) {
		return topErr
	}
	list, err := manifest.ListFromBlob(blob, mime)
	if err != nil {
		return topErr
	}
	instance, err := list.ChooseInstance(g.sys)
	if err != nil {
		return topErr
	}
	if ok, err := g.policy.IsRunningImageAllowed(ctx, image.UnparsedInstance(src, &instance)); err == nil && ok {
		return nil
	}
	return topErr
}

// message is one SOCK_SEQPACKET message with the descriptors it carries.
type message struct {
	data []byte
	fds  []int
}

func (m message) close() {
	for _, fd := range m.fds {
		syscall.Close(fd)
	}
}

func receive(sock int) (message, error) {
	buf := make([]byte, maxMsgSize+1)
	oob := make([]byte, syscall.CmsgSpace(maxFds*4))
	n, oobn, _, _, err := syscall.Recvmsg(sock, buf, oob, syscall.MSG_CMSG_CLOEXEC)
	if err != nil {
		return message{}, err
	}
	m := message{data: buf[:n]}
	if oobn > 0 {
		cmsgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return m, err
		}
		for _, c := range cmsgs {
			fds, err := syscall.ParseUnixRights(&c)
			if err == nil {
				m.fds = append(m.fds, fds...)
			}
		}
	}
	return m, nil
}

func send(sock int, m message) error {
	var oob []byte
	if len(m.fds) > 0 {
		oob = syscall.UnixRights(m.fds...)
	}
	return syscall.Sendmsg(sock, m.data, oob, nil, 0)
}

type request struct {
	Method string `json:"method"`
	Args   []any  `json:"args"`
}

type reply struct {
	Success bool   `json:"success"`
	Value   any    `json:"value"`
	PipeID  uint32 `json:"pipeid"`
	Error   string `json:"error"`
}

func failure(text string) message {
	data, _ := json.Marshal(reply{Success: false, Error: text})
	return message{data: data}
}

// relay passes the client's requests to skopeo and its replies back, checking the
// images skopeo opens. It returns when either side closes.
func relay(client, skopeo int, o options) error {
	var g *gate
	for {
		in, err := receive(client)
		if err != nil {
			return fmt.Errorf("reading a request: %w", err)
		}
		if len(in.data) == 0 && len(in.fds) == 0 { // the client closed the socket
			return nil
		}
		var req request
		_ = json.Unmarshal(in.data, &req) // skopeo answers a malformed request itself
		err = send(skopeo, in)
		in.close()
		if err != nil {
			return fmt.Errorf("passing %s to skopeo: %w", req.Method, err)
		}
		out, err := receive(skopeo)
		if err != nil {
			return fmt.Errorf("reading skopeo's reply to %s: %w", req.Method, err)
		}
		if len(out.data) == 0 && len(out.fds) == 0 { // skopeo exited
			return nil
		}
		out = answer(req, out, o, &g, skopeo)
		err = send(client, out)
		out.close()
		if err != nil {
			return fmt.Errorf("passing the reply to %s: %w", req.Method, err)
		}
	}
}

// answer is what the client gets for skopeo's reply “out“ to “req“.
func answer(req request, out message, o options, g **gate, skopeo int) message {
	var rep reply
	if err := json.Unmarshal(out.data, &rep); err != nil || !rep.Success {
		return out
	}
	switch req.Method {
	case "Initialize":
		made, err := newGate(o)
		if err != nil {
			out.close()
			return failure(err.Error())
		}
		*g = made
	case "OpenImage", "OpenImageOptional":
		id, ok := rep.Value.(float64)
		if !ok || id == 0 || len(req.Args) != 1 || *g == nil {
			return out
		}
		name, _ := req.Args[0].(string)
		if err := (*g).check(name); err != nil {
			out.close()
			closeImage(skopeo, id)
			return failure(err.Error())
		}
	}
	return out
}

func closeImage(skopeo int, id float64) {
	data, _ := json.Marshal(request{Method: "CloseImage", Args: []any{id}})
	if send(skopeo, message{data: data}) == nil {
		if m, err := receive(skopeo); err == nil {
			m.close()
		}
	}
}

// inherited lists this process's descriptors above stderr, to pass on to skopeo at the
// same numbers (the client may name one, e.g. `--authfile /proc/self/fd/N`).
func inherited(except int) []*os.File {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	var files []*os.File
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 || fd == except {
			continue
		}
		// what the client left open for skopeo; this process's own (the directory read
		// here, the runtime's poller) are close-on-exec
		flags, err := fcntl(fd, syscall.F_GETFD)
		if err != nil || flags&syscall.FD_CLOEXEC != 0 {
			continue
		}
		for len(files) < fd-3 {
			files = append(files, nil)
		}
		files = append(files, os.NewFile(uintptr(fd), e.Name()))
	}
	return files
}

func fcntl(fd, cmd int) (int, error) {
	r, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), uintptr(cmd), 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

func proxy(skopeo string, args []string, o options) int {
	extra := inherited(o.sockfd)
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "policygate: socketpair: %v\n", err)
		return 1
	}
	theirs := os.NewFile(uintptr(pair[1]), "skopeo-socket")
	childArgs := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ { // skopeo gets its socket on stdin
		name, _, hasValue := strings.Cut(args[i], "=")
		if name == "--sockfd" {
			if !hasValue {
				i++
			}
			continue
		}
		childArgs = append(childArgs, args[i])
	}
	cmd := exec.Command(skopeo, childArgs...)
	cmd.Args[0] = "skopeo"
	cmd.Stdin, cmd.Stdout, cmd.Stderr = theirs, os.Stdout, os.Stderr
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "policygate: starting %s: %v\n", skopeo, err)
		return 1
	}
	theirs.Close()
	relayErr := relay(o.sockfd, pair[0], o)
	syscall.Close(pair[0]) // skopeo sees the client leave
	syscall.Close(o.sockfd)
	waitErr := cmd.Wait()
	if relayErr != nil {
		fmt.Fprintf(os.Stderr, "policygate: %v\n", relayErr)
	}
	var exit *exec.ExitError
	switch {
	case errors.As(waitErr, &exit):
		return exit.ExitCode()
	case waitErr != nil:
		fmt.Fprintf(os.Stderr, "policygate: %v\n", waitErr)
		return 1
	case relayErr != nil:
		return 1
	}
	return 0
}

func main() {
	skopeo := os.Getenv("POLICYGATE_SKOPEO")
	if skopeo == "" {
		skopeo = "/usr/bin/skopeo"
	}
	args := os.Args[1:]
	sub, o, err := parseArgs(args)
	if err != nil || sub != proxyCommand {
		// not the image proxy (or options skopeo itself should complain about)
		err := syscall.Exec(skopeo, append([]string{"skopeo"}, args...), os.Environ())
		fmt.Fprintf(os.Stderr, "policygate: exec %s: %v\n", skopeo, err)
		os.Exit(127)
	}
	os.Exit(proxy(skopeo, args, o))
}
