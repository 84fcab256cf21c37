package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// portForwarder returns a dial function that reaches a Pod's agent port
// through the API server's port-forward: one SPDY connection per
// connection to the agent, which the agent client pools. Each dial has a
// round tripper of its own: client-go's keeps the connection it upgraded
// in itself, so two dials sharing one could swap connections.
func portForwarder(cfg *rest.Config, client kubernetes.Interface) (func(context.Context, *corev1.Pod) (net.Conn, error), error) {
	if _, _, err := spdy.RoundTripperFor(cfg); err != nil {
		return nil, fmt.Errorf("kubernetes runtime: port-forward transport: %w", err)
	}
	return func(ctx context.Context, pod *corev1.Pod) (net.Conn, error) {
		url := client.CoreV1().RESTClient().Post().Resource("pods").
			Namespace(pod.Namespace).Name(pod.Name).SubResource("portforward").URL()
		transport, upgrader, err := spdy.RoundTripperFor(cfg)
		if err != nil {
			return nil, fmt.Errorf("port-forward to pod %s: %w", pod.Name, err)
		}
		type result struct {
			conn net.Conn
			err  error
		}
		// Dial takes no context: give up on it when ctx ends.
		done := make(chan result, 1)
		go func() {
			conn, err := forward(spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, url), AgentPort)
			done <- result{conn, err}
		}()
		select {
		case res := <-done:
			if res.err != nil {
				return nil, fmt.Errorf("port-forward to pod %s: %w", pod.Name, res.err)
			}
			return res.conn, nil
		case <-ctx.Done():
			go func() {
				if res := <-done; res.conn != nil {
					res.conn.Close()
				}
			}()
			return nil, ctx.Err()
		}
	}, nil
}

// forward opens a port-forward connection and its streams to port.
func forward(d httpstream.Dialer, port int) (net.Conn, error) {
	conn, _, err := d.Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, strconv.Itoa(port))
	h.Set(corev1.PortForwardRequestIDHeader, "0")
	errStream, err := conn.CreateStream(h)
	if err != nil {
		conn.Close()
		return nil, err
	}
	errStream.Close() // nothing to send on it
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(h)
	if err != nil {
		conn.Close()
		return nil, err
	}
	c := &streamConn{conn: conn, data: data}
	// The kubelet reports a failure to reach the port on the error stream.
	go func() {
		msg, _ := io.ReadAll(io.LimitReader(errStream, 4096))
		if len(msg) > 0 {
			c.fail(fmt.Errorf("port-forward: %s", msg))
		}
	}()
	return c, nil
}

// streamConn is a port-forward data stream as a net.Conn. A deadline
// closes the connection when it passes (there is no timeout to recover
// from): the agent client sets one only to interrupt a dial.
type streamConn struct {
	conn httpstream.Connection
	data httpstream.Stream

	mu    sync.Mutex
	err   error
	timer *time.Timer
}

func (c *streamConn) fail(err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
	c.Close()
}

func (c *streamConn) failed(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil && err != nil && !errors.Is(err, io.EOF) {
		return c.err
	}
	return err
}

func (c *streamConn) Read(p []byte) (int, error) {
	n, err := c.data.Read(p)
	return n, c.failed(err)
}

func (c *streamConn) Write(p []byte) (int, error) {
	n, err := c.data.Write(p)
	return n, c.failed(err)
}

// CloseWrite half-closes the stream: the agent sees the end of its input.
func (c *streamConn) CloseWrite() error { return c.data.Close() }

func (c *streamConn) Close() error {
	_ = c.data.Reset()
	return c.conn.Close()
}

func (c *streamConn) LocalAddr() net.Addr  { return forwardAddr{} }
func (c *streamConn) RemoteAddr() net.Addr { return forwardAddr{} }
func (c *streamConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	if !t.IsZero() {
		c.timer = time.AfterFunc(time.Until(t), func() { c.fail(os.ErrDeadlineExceeded) })
	}
	return nil
}

func (c *streamConn) SetReadDeadline(t time.Time) error  { return c.SetDeadline(t) }
func (c *streamConn) SetWriteDeadline(t time.Time) error { return c.SetDeadline(t) }

type forwardAddr struct{}

func (forwardAddr) Network() string { return "port-forward" }
func (forwardAddr) String() string  { return "port-forward" }
