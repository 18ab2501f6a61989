import RelaisConfig
import RelaisStore
import Synchronization

/// Which sessions are known to be live, in process: a session check (`/auth?session=1`,
/// `/userinfo`, `/introspect`) answers from here instead of asking the store each time.
///
/// Safe because every revocation is announced to every instance in the same atomic step that
/// deletes the session (``KeyValueStore/deleteAnnouncing(_:_:)``), and this cache is trusted only
/// while its ``AnnouncementListener`` is current: a revoked session is refused by every instance
/// within ``AnnouncementListener/window`` (0.8 s), or at once when the subscription is lost (the
/// cache is then bypassed and emptied). An entry never outlives the session's remaining TTL nor
/// ``maxAge``, which bounds what a deletion behind Relais' back (`redis-cli DEL`) can leave.
final class SessionLiveness: Sendable {
    static let maxAge: Double = 60
    private let entries: Entries
    private let listener: AnnouncementListener

    /// `maxBytes` (`memory.session_liveness`): about 100 bytes an entry.
    init(store: any KeyValueStore, maxBytes: Int = MemorySettings().sessionLiveness) {
        let entries = Entries(maxBytes: maxBytes)
        self.entries = entries
        listener = AnnouncementListener(onMessage: { sid in entries.forget(sid) }, onReset: { entries.forgetAll() })
        store.listen(listener)
    }

    /// True when `sid` is known live at `now`; false means "ask the store", never "ended".
    func knowsLive(_ sid: String, now: Double) -> Bool {
        listener.isCurrent && entries.cache.get(sid, now: now) != nil
    }

    /// The epoch to hand back to ``remember(_:until:now:readSince:)`` after reading the store.
    var currentEpoch: UInt64 { entries.epoch.withLock { $0 } }

    /// Records that the store said `sid` lives until `until`, unless an announcement or a reset
    /// came since the read began (`readSince`) or the listener is not current.
    func remember(_ sid: String, until: Double, now: Double, readSince: UInt64) {
        guard listener.isCurrent else { return }
        entries.epoch.withLock { epoch in
            guard epoch == readSince else { return }
            entries.cache.put(sid, until, bytes: sid.utf8.count, expiresAt: min(until, now + Self.maxAge), now: now)
        }
    }

    /// This instance ended `sid`: no need to wait for its own announcement.
    func forget(_ sid: String) { entries.forget(sid) }

    var count: Int { entries.cache.count }

    /// The cache and its epoch, which the listener's callbacks reach without holding the owner.
    private final class Entries: Sendable {
        let cache: MemoryCache<String, Double>
        /// Moves on every announcement and reset: a store read that began before one is not cached.
        let epoch = Mutex<UInt64>(0)

        init(maxBytes: Int) { cache = MemoryCache(maxBytes: maxBytes) }

        func forget(_ sid: String) {
            epoch.withLock { epoch in
                epoch &+= 1
                cache.remove(sid)
            }
        }

        func forgetAll() {
            epoch.withLock { epoch in
                epoch &+= 1
                cache.removeAll()
            }
        }
    }
}
