import type { Metadata } from 'next';
import Link from 'next/link';
import type { ReactNode } from 'react';
import { CartLink } from '@/components/CartLink';
import { Providers } from '@/components/Providers';
import './globals.css';

export const metadata: Metadata = {
  title: 'idem checkout demo',
  description:
    'A checkout that charges exactly once while the network, the user and the server misbehave.',
};

export default function RootLayout({ children }: { children: ReactNode }) {
  return (
    <html lang="en">
      <body>
        <Providers>
          <header className="site">
            <div className="inner">
              <Link href="/" className="brand">
                idem shop <span>· every write will be sent twice</span>
              </Link>
              <nav>
                <Link href="/">Products</Link>
                <CartLink />
              </nav>
            </div>
          </header>
          <main>{children}</main>
        </Providers>
      </body>
    </html>
  );
}
