import Hummingbird
import RelaisStore

/// Gives each request one store budget for all its calls (`store.request_budget`): against a
/// frozen Redis a request fails after about one budget, not after one timeout per call.
struct StoreBudgetMiddleware: RouterMiddleware {
    typealias Context = RelaisRequestContext
    let budget: Duration

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        try await StoreBudget.withBudget(budget) { try await next(request, context) }
    }
}
