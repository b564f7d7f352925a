/// Values of one generic type in numbered slots, each empty or holding one value.
///
/// Where the server keeps what the responder made of its requests (``HTTPResponder/Classified``)
/// on their way from a loop to a worker. The server is generic over that type, but its code is not
/// specialized for it (the responder comes from another module), and unspecialized code looks up
/// type metadata at run time for each array, optional or struct of a generic element it touches:
/// with loops, connections and queued jobs generic, an echo server ran 70% more instructions per
/// request. These slots use only `Value`'s own metadata, which comes with the instance. Not
/// thread-safe: its owner confines or locks it.
final class TypedSlots<Value> {
    private var values: UnsafeMutablePointer<Value>
    /// Which slots hold a value. Raw memory too: an array would check its uniqueness and the
    /// exclusivity of each access, and the queue calls these under its lock.
    private var occupied: UnsafeMutablePointer<Bool>
    private(set) var capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
        values = .allocate(capacity: capacity)
        occupied = .allocate(capacity: capacity)
        occupied.initialize(repeating: false, count: capacity)
    }

    deinit {
        removeAll()
        values.deallocate()
        occupied.deallocate()
    }

    /// Puts `value` in slot `index`, replacing what it held.
    func put(_ value: consuming Value, at index: Int) {
        precondition(index >= 0 && index < capacity, "slot \(index) out of \(capacity)")
        if occupied[index] {
            values[index] = value
        } else {
            (values + index).initialize(to: value)
            occupied[index] = true
        }
    }

    /// Empties slot `index`, which must hold a value, and returns it.
    func take(at index: Int) -> Value {
        precondition(index >= 0 && index < capacity && occupied[index], "slot \(index) is empty")
        occupied[index] = false
        return (values + index).move()
    }

    /// Empties slot `index`, if it holds a value.
    func discard(at index: Int) {
        precondition(index >= 0 && index < capacity, "slot \(index) out of \(capacity)")
        guard occupied[index] else { return }
        occupied[index] = false
        (values + index).deinitialize(count: 1)
    }

    /// Empties every slot.
    func removeAll() {
        for index in 0..<capacity { discard(at: index) }
    }

    /// Adds empty slots up to `capacity`; what the slots hold stays in them.
    func grow(to capacity: Int) {
        guard capacity > self.capacity else { return }
        let grownValues = UnsafeMutablePointer<Value>.allocate(capacity: capacity)
        let grownOccupied = UnsafeMutablePointer<Bool>.allocate(capacity: capacity)
        for index in 0..<self.capacity where occupied[index] {
            (grownValues + index).moveInitialize(from: values + index, count: 1)
        }
        grownOccupied.moveInitialize(from: occupied, count: self.capacity)
        (grownOccupied + self.capacity).initialize(repeating: false, count: capacity - self.capacity)
        values.deallocate()
        occupied.deallocate()
        values = grownValues
        occupied = grownOccupied
        self.capacity = capacity
    }
}
