import Hummingbird
import NIOCore
import RelaisConfig
import RelaisServer

/// The files that let claimed https redirect URIs open the app instead of the browser: iOS
/// universal links and Android App Links, served from the configured files as they are.
struct WellKnownRoutes: RelayRoutes {
    let files: WellKnownSettings

    func register(on router: some RouterMethods<RelaisRequestContext>) {
        for (path, body) in [("/.well-known/apple-app-site-association", files.appleAppSiteAssociation), ("/.well-known/assetlinks.json", files.assetLinks)] {
            guard let body else { continue }
            router.get(RouterPath(path)) { _, _ in
                Response(status: .ok, headers: [.contentType: "application/json", .cacheControl: "public, max-age=3600"], body: .init(byteBuffer: ByteBuffer(bytes: body)))
            }
        }
    }
}
