import HTTP1
import ProfileAuth

/// Who a request comes from, for the limits that are per client (docs/design.md §5.5): the
/// token's subject when the request carries a verified token, else the client's address.
///
/// Behind a gateway every connection comes from the gateway, so the address is taken from
/// `X-Forwarded-For` — but only the entries the configured gateways appended, counted from the
/// right: the leftmost entries are whatever the client sent and prove nothing.
public struct ClientIdentity: Sendable {
    /// Gateways in front of the service that each append the address they saw to
    /// `X-Forwarded-For` (nginx's `$proxy_add_x_forwarded_for`, Envoy's default). 0: the
    /// socket's peer is the client.
    public var trustedProxyHops: Int

    public init(trustedProxyHops: Int = 0) {
        self.trustedProxyHops = trustedProxyHops
    }

    /// The key a per-client limit counts under.
    func key(for request: HTTPRequest, token: VerifiedToken?) -> String {
        if let token { return "sub:" + token.subject.prefix(128) }
        return "addr:" + address(of: request).prefix(64)
    }

    /// The client's address: the socket peer, or the entry of `X-Forwarded-For` that the
    /// outermost trusted gateway appended.
    func address(of request: HTTPRequest) -> String {
        let peer = request.peerAddress ?? ""
        guard trustedProxyHops > 0 else { return peer }
        let entries = request.headers.values(for: "X-Forwarded-For").flatMap { value in
            value.split(separator: ",").map { String($0.trimmed) }
        }.filter { !$0.isEmpty }
        // Fewer entries than trusted hops: the request did not come through them all.
        guard entries.count >= trustedProxyHops else { return peer }
        return entries[entries.count - trustedProxyHops]
    }
}
