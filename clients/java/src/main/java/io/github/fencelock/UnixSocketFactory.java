package io.github.fencelock;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketAddress;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.Channels;
import java.nio.channels.SocketChannel;
import javax.net.SocketFactory;

/**
 * PgJDBC over the server's Unix socket with the JDK's own Unix-domain channels (Java 16 and
 * later), for {@code socketFactory=fencelock.UnixSocketFactory&socketFactoryArg=/socket/dir}: the
 * port of the URL picks the socket file {@code .s.PGSQL.<port>} in that directory, as in libpq.
 * Applications that reach the server over TCP do not need it. Timeouts ({@code setSoTimeout})
 * are not applied to reads; PgJDBC's cancel opens its own socket, so cancelling works.
 */
public final class UnixSocketFactory extends SocketFactory {
    private final String dir;

    public UnixSocketFactory(String dir) {
        this.dir = dir;
    }

    @Override
    public Socket createSocket() {
        return new UnixSocket(dir);
    }

    @Override
    public Socket createSocket(String host, int port) throws IOException {
        Socket s = createSocket();
        s.connect(InetSocketAddress.createUnresolved(host, port));
        return s;
    }

    @Override
    public Socket createSocket(String host, int port, InetAddress localHost, int localPort) throws IOException {
        return createSocket(host, port);
    }

    @Override
    public Socket createSocket(InetAddress host, int port) throws IOException {
        return createSocket(host.getHostName(), port);
    }

    @Override
    public Socket createSocket(InetAddress address, int port, InetAddress localAddress, int localPort)
            throws IOException {
        return createSocket(address, port);
    }

    /** A java.net.Socket whose streams are those of a Unix-domain SocketChannel. */
    private static final class UnixSocket extends Socket {
        private final String dir;
        private SocketChannel channel;
        private InputStream in;
        private OutputStream out;
        private int soTimeout;

        UnixSocket(String dir) {
            this.dir = dir;
        }

        @Override
        public void connect(SocketAddress endpoint, int timeout) throws IOException {
            int port = ((InetSocketAddress) endpoint).getPort();
            SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX);
            try {
                ch.connect(UnixDomainSocketAddress.of(new File(dir, ".s.PGSQL." + port).getPath()));
            } catch (IOException e) {
                ch.close();
                throw e;
            }
            channel = ch;
            in = Channels.newInputStream(ch);
            out = Channels.newOutputStream(ch);
        }

        @Override
        public void connect(SocketAddress endpoint) throws IOException {
            connect(endpoint, 0);
        }

        @Override
        public InputStream getInputStream() throws IOException {
            if (in == null) throw new IOException("not connected");
            return in;
        }

        @Override
        public OutputStream getOutputStream() throws IOException {
            if (out == null) throw new IOException("not connected");
            return out;
        }

        @Override
        public boolean isConnected() {
            return channel != null && channel.isConnected();
        }

        @Override
        public boolean isClosed() {
            return channel != null && !channel.isOpen();
        }

        @Override
        public synchronized void close() throws IOException {
            if (channel != null) channel.close();
        }

        @Override
        public void shutdownInput() throws IOException {
            if (channel != null) channel.shutdownInput();
        }

        @Override
        public void shutdownOutput() throws IOException {
            if (channel != null) channel.shutdownOutput();
        }

        // TCP options mean nothing here; remember the timeout for getSoTimeout.
        @Override
        public void setTcpNoDelay(boolean on) {}

        @Override
        public void setKeepAlive(boolean on) {}

        @Override
        public void setReceiveBufferSize(int size) {}

        @Override
        public void setSendBufferSize(int size) {}

        @Override
        public synchronized void setSoTimeout(int timeout) {
            soTimeout = timeout;
        }

        @Override
        public synchronized int getSoTimeout() {
            return soTimeout;
        }
    }
}
