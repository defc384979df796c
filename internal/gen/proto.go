package main

// Protobuf code generation without protoc: the .proto files are compiled to descriptors in
// process (github.com/bufbuild/protocompile, which produces the same descriptors protoc does),
// the Go messages are generated in process by protoc-gen-go's generator at the protobuf module
// version in go.mod, and the gRPC stubs by protoc-gen-go-grpc run as a Go tool dependency
// (`go tool protoc-gen-go-grpc`, version pinned by go.mod's tool directive). Every input is
// pinned by go.mod, so the output is byte-identical on any machine and the drift check is stable.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/bufbuild/protocompile"
	gengo "google.golang.org/protobuf/cmd/protoc-gen-go/internal_gengo"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/pluginpb"
)

// protoFiles are the .proto files whose Go code is committed, relative to the repository root.
// Each yields <name>.pb.go and <name>_grpc.pb.go beside it (paths=source_relative).
var protoFiles = []string{
	"salesforce/pubsub/pubsubpb/pubsub_api.proto",
}

// protoOutputs returns one output per generated Go file. The files are generated together
// once per process and then served from memory.
func protoOutputs() []output {
	g := &protoGen{}
	var out []output
	for _, f := range protoFiles {
		base := f[:len(f)-len(filepath.Ext(f))]
		for _, suffix := range []string{".pb.go", "_grpc.pb.go"} {
			path := base + suffix
			out = append(out, output{path: path, gen: func() ([]byte, error) { return g.file(path) }})
		}
	}
	return out
}

// protoGen runs the generation once and remembers the files it produced.
type protoGen struct {
	once  sync.Once
	files map[string][]byte
	err   error
}

func (g *protoGen) file(path string) ([]byte, error) {
	g.once.Do(func() { g.files, g.err = generateProtos(repoRoot()) })
	if g.err != nil {
		return nil, g.err
	}
	b, ok := g.files[path]
	if !ok {
		return nil, fmt.Errorf("the generators produced no %s", path)
	}
	return b, nil
}

// repoRoot is the -root flag of the command (the repository root).
func repoRoot() string {
	if f := flag.Lookup("root"); f != nil {
		return f.Value.String()
	}
	return "."
}

// generateProtos compiles protoFiles under root and returns the generated files by path.
func generateProtos(root string) (map[string][]byte, error) {
	comp := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{root}}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	compiled, err := comp.Compile(context.Background(), protoFiles...)
	if err != nil {
		return nil, fmt.Errorf("compiling the .proto files: %w", err)
	}
	req := &pluginpb.CodeGeneratorRequest{
		FileToGenerate: protoFiles,
		Parameter:      proto.String("paths=source_relative"),
	}
	seen := map[string]bool{}
	for _, f := range compiled {
		// Dependencies first, as protoc orders them (only the well-known types can occur).
		imports := f.Imports()
		for i := 0; i < imports.Len(); i++ {
			dep := imports.Get(i).FileDescriptor
			if !seen[dep.Path()] {
				seen[dep.Path()] = true
				req.ProtoFile = append(req.ProtoFile, protodesc.ToFileDescriptorProto(dep))
			}
		}
		if !seen[f.Path()] {
			seen[f.Path()] = true
			req.ProtoFile = append(req.ProtoFile, protodesc.ToFileDescriptorProto(f))
		}
	}

	files := map[string][]byte{}
	goResp, err := runGoGenerator(req)
	if err != nil {
		return nil, fmt.Errorf("protoc-gen-go: %w", err)
	}
	if err := collect(goResp, files); err != nil {
		return nil, fmt.Errorf("protoc-gen-go: %w", err)
	}
	grpcResp, err := runToolPlugin(root, "protoc-gen-go-grpc", req)
	if err != nil {
		return nil, fmt.Errorf("protoc-gen-go-grpc: %w", err)
	}
	if err := collect(grpcResp, files); err != nil {
		return nil, fmt.Errorf("protoc-gen-go-grpc: %w", err)
	}
	return files, nil
}

// runGoGenerator is protoc-gen-go's main, in process.
func runGoGenerator(req *pluginpb.CodeGeneratorRequest) (*pluginpb.CodeGeneratorResponse, error) {
	gen, err := protogen.Options{}.New(req)
	if err != nil {
		return nil, err
	}
	for _, f := range gen.Files {
		if f.Generate {
			gengo.GenerateFile(gen, f)
		}
	}
	gen.SupportedFeatures = gengo.SupportedFeatures
	gen.SupportedEditionsMinimum = gengo.SupportedEditionsMinimum
	gen.SupportedEditionsMaximum = gengo.SupportedEditionsMaximum
	return gen.Response(), nil
}

// runToolPlugin runs a protoc plugin declared as a tool in go.mod (`go tool name`), feeding it
// the request on stdin as protoc would.
func runToolPlugin(root, name string, req *pluginpb.CodeGeneratorRequest) (*pluginpb.CodeGeneratorResponse, error) {
	in, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(goCommand(), "tool", name)
	cmd.Dir = root
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go tool %s: %w: %s", name, err, bytes.TrimSpace(stderr.Bytes()))
	}
	resp := &pluginpb.CodeGeneratorResponse{}
	if err := proto.Unmarshal(stdout.Bytes(), resp); err != nil {
		return nil, fmt.Errorf("reading the plugin's response: %w", err)
	}
	return resp, nil
}

// goCommand is the go command of the toolchain running this generator.
func goCommand() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go") //nolint:staticcheck // fallback when go is not on PATH
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return "go"
}

func collect(resp *pluginpb.CodeGeneratorResponse, files map[string][]byte) error {
	if resp.Error != nil {
		return errors.New(resp.GetError())
	}
	for _, f := range resp.File {
		if f.GetInsertionPoint() != "" {
			return fmt.Errorf("unexpected insertion point in %s", f.GetName())
		}
		files[f.GetName()] = []byte(f.GetContent())
	}
	return nil
}
