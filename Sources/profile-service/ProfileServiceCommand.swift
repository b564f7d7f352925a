@main
struct ProfileServiceCommand {
    static func main() {}
}
